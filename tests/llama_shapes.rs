//! What llama.cpp's server answers that OpenAI's does not, through the real binaries against
//! the scripted server speaking its shapes: a chat template that allows one system message,
//! the first; `/v1/responses` events known by item ids, with a cut answer ended as
//! completed; a free model on loopback, recorded; and a call cut at the output limit left
//! pending at `max_turns`.

mod common;

use common::cli::json_lines as events;
use common::home::Home;
use ryvos_testkit::{Reply, ScriptedModelServer, SECOND_SYSTEM_REFUSED};
use serde_json::Value;

/// The last `RunComplete` of `stdout`.
fn completion(stdout: &str) -> Value {
    events(stdout)
        .into_iter()
        .rev()
        .find(|e| e["type"] == "RunComplete")
        .expect("a RunComplete")
}

/// The messages of every request after its first, by role.
fn roles_after_first(request: &Value) -> Vec<String> {
    request["messages"].as_array().unwrap()[1..]
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guardian_hint_goes_where_a_strict_template_takes_it_and_the_session_resumes() {
    let read = r#"{"path": "missing.txt"}"#;
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "read", read)]),
        Reply::tool_calls(&[("c2", "read", read)]),
        Reply::tool_calls(&[("c3", "read", read)]),
        Reply::text(&["The file is missing."]),
        Reply::text(&["Still missing."]),
    ])
    .await;
    let home = Home::new(&server, "");
    let (code, stdout, stderr) = home.ryvos(&["run", "--json", "read", "it"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(completion(&stdout)["status"], "completed", "{stdout}");
    assert!(
        events(&stdout)
            .iter()
            .any(|e| e["type"] == "GuardianDoomLoop"),
        "three identical failing reads earn a hint: {stdout}"
    );
    let session = completion(&stdout)["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, stdout, stderr) = home
        .ryvos(&["run", "--json", "--resume", &session, "and", "now?"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(completion(&stdout)["status"], "completed");
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    for request in &requests {
        assert!(!roles_after_first(request).contains(&"system".to_owned()));
    }
    // The hint reached the model, marked, before its answer and on the resume.
    let resumed = requests.last().unwrap().to_string();
    assert!(resumed.contains("[System] [Guardian]"), "{resumed}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_strict_templates_refusal_reaches_the_reason_in_its_own_words() {
    // The server refuses whatever is asked: the template's words must reach the person.
    let server = ScriptedModelServer::start([Reply::error(
        400,
        &format!(
            "Error rendering the chat template at row 1, column 512: {} ^ Jinja Exception: \
             {SECOND_SYSTEM_REFUSED}",
            "{%- for message in loop_messages %}".repeat(12)
        ),
    )])
    .await;
    let home = Home::new(&server, "");
    let (code, _, stderr) = home.ryvos(&["run", "hello"]).await;
    assert_ne!(code, 0);
    assert!(
        stderr.contains("Only user and assistant roles are supported"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_responses_provider_reads_llama_cpps_events_and_its_cut_answers() {
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "write", r#"{"path": "a.txt", "content": "one"}"#)])
            .shaped_like_llama_cpp(),
        // Cut at the output limit, and said completed: the call must not run.
        Reply::tool_calls(&[("c2", "write", r#"{"path": "b.txt", "content": "tw"#)])
            .cut_at_output_limit()
            .shaped_like_llama_cpp(),
        Reply::text(&["Wrote ", "a.txt."]).shaped_like_llama_cpp(),
    ])
    .await;
    let home = Home::with_model(
        &server,
        "provider = \"openai-responses\"\nmax_output_tokens = 64",
        "",
    );
    let (code, stdout, stderr) = home.ryvos(&["run", "--json", "write", "them"]).await;
    assert_eq!(code, 0, "{stderr}");
    let done = completion(&stdout);
    assert_eq!(done["status"], "completed", "{stdout}");
    assert_eq!(done["output"], "Wrote a.txt.");
    let ws = home.workspace.path();
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one");
    assert!(!ws.join("b.txt").exists(), "a cut call does not run");
    let cut = events(&stdout)
        .into_iter()
        .find(|e| e["type"] == "ToolEnd" && e["call_id"] == "c2")
        .expect("the cut call is answered");
    assert!(cut["output"].as_str().unwrap().contains("cut off"), "{cut}");
    server.assert_no_orphans();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recorded_run_of_a_model_on_loopback_costs_nothing() {
    let server =
        ScriptedModelServer::start([Reply::text(&["free"]).usage(Some((200_000, 50_000)))]).await;
    let home = Home::new(&server, "");
    let record = home.path().join("recording.jsonl");
    let (code, stdout, stderr) = home
        .ryvos(&["run", "--json", "--record", record.to_str().unwrap(), "hi"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(completion(&stdout)["cost_cents"], 0.0, "{stdout}");
    assert!(record.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_cut_at_max_turns_is_answered_as_cut_on_resume() {
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "write", r#"{"path": "a.txt", "content": "lo"#)])
            .cut_at_output_limit(),
        Reply::text(&["Done."]),
    ])
    .await;
    let home = Home::new(&server, "");
    let (code, stdout, _) = home
        .ryvos(&["run", "--json", "--max-turns", "1", "write", "it"])
        .await;
    assert_ne!(code, 0);
    assert_eq!(completion(&stdout)["status"], "max_turns", "{stdout}");
    let session = completion(&stdout)["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, _, stderr) = home
        .ryvos(&["run", "--json", "--resume", &session, "go on"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let requests = server.requests();
    let resumed = requests.last().unwrap();
    let result = resumed["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the cut call has its result");
    let content = result["content"].as_str().unwrap();
    assert!(
        content.contains("cut off at your output limit"),
        "{content}"
    );
    assert!(!content.contains("not valid JSON"), "{content}");
    server.assert_no_orphans();
}
