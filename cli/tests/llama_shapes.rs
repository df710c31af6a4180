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

/// Runs `ryvos run --json --resume` on the session of the run `stdout` shows, with a
/// follow-up prompt.
async fn resume_after(home: &Home, stdout: &str) -> (i32, String, String) {
    let done = completion(stdout);
    let session = done["session_id"].as_str().expect("a session id");
    home.ryvos(&["run", "--json", "--resume", session, "and", "now?"])
        .await
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
    let (code, stdout, stderr) = resume_after(&home, &stdout).await;
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

/// The window of the llama.cpp server the overflow test stands for, in its tokens (a token per
/// 4 bytes of request, as the scripted server counts).
const N_CTX: u64 = 8192;

/// The scripted server's count of a request: a token per 4 bytes.
fn server_count(request: &Value) -> u64 {
    request.to_string().len() as u64 / 4
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_past_llama_cpps_window_makes_room_and_the_session_resumes() {
    // Past the window: llama.cpp's refusal, with its sizes; else the script.
    let router: ryvos_testkit::Router = std::sync::Arc::new(|request: &Value| {
        let asked = server_count(request);
        (asked > N_CTX).then(|| Reply::llama_cpp_overflow(asked, N_CTX))
    });
    let server = ScriptedModelServer::start_routed(
        [
            Reply::tool_calls(&[("c1", "read", r#"{"path": "big.txt"}"#)]).prompt_tokens_by_size(),
            Reply::text(&["It is a long file."]).prompt_tokens_by_size(),
            Reply::text(&["Still here."]).prompt_tokens_by_size(),
        ],
        Some(router),
    )
    .await;
    let home = Home::new(&server, "");
    // 72 KB of varied lines: about 18,000 of the server's tokens, twice its window.
    let big: String = (0..1800)
        .map(|i| format!("line {i:05}: the quick brown fox jumps over the lazy dog\n"))
        .collect();
    std::fs::write(home.workspace.path().join("big.txt"), &big).unwrap();
    let (code, stdout, stderr) = home.ryvos(&["run", "--json", "read", "big.txt"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(completion(&stdout)["status"], "completed", "{stdout}");
    assert!(stderr.contains("trimmed"), "{stderr}");
    let session = completion(&stdout)["session_id"]
        .as_str()
        .unwrap()
        .to_owned();

    // The resume reloads the whole result from the store, and fits it again.
    let (code, stdout, stderr) = resume_after(&home, &stdout).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(completion(&stdout)["output"], "Still here.");
    // Every answered request fit the window; the store kept the result whole.
    let requests = server.requests();
    let answered: Vec<u64> = requests
        .iter()
        .map(server_count)
        .filter(|n| *n <= N_CTX)
        .collect();
    assert_eq!(
        answered.len(),
        3,
        "{:?}",
        requests.iter().map(server_count).collect::<Vec<_>>()
    );
    let (_, history, _) = home.ryvos(&["history", "--json", &session]).await;
    let longest = history.split("line 0").count();
    assert!(
        longest > 300,
        "the store keeps the result whole ({longest} lines)"
    );
    server.assert_no_orphans();
}
