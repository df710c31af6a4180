//! `provider = "openai-responses"` against the scripted server's Responses format, which
//! refuses what OpenAI's refuses (a call without its output, reasoning not passed back whole):
//! text, parallel calls answered by their `call_id`, reasoning carried to the next turn, a
//! call cut off at the output limit, and a session resumed after a restart.

mod common;

use common::Harness;
use ryvos::{EventKind, RunStatus};
use ryvos_testkit::{encrypted_reasoning, Reply};
use serde_json::Value;

fn responses(c: &mut ryvos::Config) {
    c.model.provider = "openai-responses".into();
    c.model.api_key = "sk-test".into();
    c.model.model = "gpt-test".into();
}

/// The input items of `request` of each type, as `(type, call_id or id)`.
fn items(request: &Value) -> Vec<(String, String)> {
    request["input"]
        .as_array()
        .expect("an input list")
        .iter()
        .map(|i| {
            let kind = i["type"].as_str().unwrap_or("message").to_owned();
            let id = i["call_id"]
                .as_str()
                .or(i["id"].as_str())
                .or(i["role"].as_str());
            (kind, id.unwrap_or_default().to_owned())
        })
        .collect()
}

#[tokio::test]
async fn a_run_keeps_its_reasoning_and_answers_parallel_calls_by_call_id() {
    let h = Harness::start(
        vec![
            Reply::text_then_tools(
                &["Reading both."],
                &[
                    ("call_a", "read", r#"{"path": "a.txt"}"#),
                    ("call_b", "read", r#"{"path": "b.txt"}"#),
                ],
            )
            .reasoning("rs_1"),
            Reply::text(&["a says hello, ", "b says bye."]).reasoning("rs_2"),
        ],
        responses,
    )
    .await;
    std::fs::write(h.workspace.path().join("a.txt"), "hello").unwrap();
    std::fs::write(h.workspace.path().join("b.txt"), "bye").unwrap();
    let (events, outcome) = h.run(h.request("what do a.txt and b.txt say?")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert_eq!(outcome.output, "a says hello, b says bye.");

    let seen = h.server.captured();
    assert!(seen.iter().all(|c| c.path == "/v1/responses"), "{seen:?}");
    assert_eq!(seen[0].header("authorization"), Some("Bearer sk-test"));
    let requests = h.server.requests();
    assert_eq!(requests[0]["model"], "gpt-test");
    assert_eq!(requests[0]["store"], false);
    assert_eq!(requests[0]["include"][0], "reasoning.encrypted_content");
    assert!(requests[0]["instructions"]
        .as_str()
        .unwrap()
        .contains("Ryvos"));
    assert_eq!(requests[0]["tools"][0]["strict"], false);
    // The second request passes the reasoning back, whole, before the output it led to, and
    // answers each call by its call_id.
    assert_eq!(
        items(&requests[1]),
        [
            ("message".into(), "user".into()),
            ("reasoning".into(), "rs_1".into()),
            ("message".into(), "assistant".into()),
            ("function_call".into(), "call_a".into()),
            ("function_call".into(), "call_b".into()),
            ("function_call_output".into(), "call_a".into()),
            ("function_call_output".into(), "call_b".into()),
        ]
    );
    let input = requests[1]["input"].as_array().unwrap();
    assert_eq!(input[1]["encrypted_content"], encrypted_reasoning("rs_1"));
    assert!(input[5]["output"].as_str().unwrap().contains("hello"));
    let usage = events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::ModelUsage {
                    estimated: false,
                    ..
                }
            )
        })
        .count();
    assert_eq!(usage, 2, "each call's usage is the server's");
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn a_call_cut_off_is_not_run_and_the_session_resumes_after_a_restart() {
    let h = Harness::start(
        vec![
            Reply::tool_calls(&[("call_w", "write", r#"{"path": "big.txt", "con"#)])
                .reasoning("rs_1")
                .cut_at_output_limit(),
            Reply::text(&["I will write it in parts."]).reasoning("rs_2"),
            Reply::text(&["Still here."]),
        ],
        responses,
    )
    .await;
    let (events, outcome) = h.run(h.request("write big.txt")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert!(
        !h.workspace.path().join("big.txt").exists(),
        "the cut call did not run"
    );
    assert!(events
        .iter()
        .any(|e| matches!(e.kind, EventKind::OutputTruncated { .. })));
    let requests = h.server.requests();
    assert_eq!(requests.len(), 2, "no request was refused");
    let cut = &requests[1]["input"].as_array().unwrap();
    let call = cut.iter().find(|i| i["type"] == "function_call").unwrap();
    assert_eq!(
        call["arguments"], "{}",
        "a cut call is replayed as every server accepts it"
    );

    // After a restart, the session's history (reasoning included) goes back as it was kept.
    let session = outcome.session_id.clone();
    let h = h.restart().await;
    let (_, resumed) = h.run(h.request("go on").session(session)).await;
    assert_eq!(resumed.status, RunStatus::Completed, "{:?}", resumed.reason);
    let last = h.server.requests().pop().unwrap();
    let kinds: Vec<String> = items(&last)
        .into_iter()
        .map(|(k, id)| format!("{k}:{id}"))
        .collect();
    assert!(kinds.contains(&"reasoning:rs_1".to_owned()), "{kinds:?}");
    assert!(kinds.contains(&"reasoning:rs_2".to_owned()), "{kinds:?}");
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn a_transient_server_error_is_retried_as_with_every_provider() {
    let h = Harness::start(
        vec![
            Reply::error(500, "The server had an error while processing your request"),
            Reply::text(&["Fine now."]),
        ],
        responses,
    )
    .await;
    let (events, outcome) = h.run(h.request("hello")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    let retries = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ModelRetry { .. }))
        .count();
    assert_eq!(retries, 1);
}
