//! What real model servers do that a careful client must survive: a tool call cut off at the
//! output limit, arguments that are not JSON, a final answer cut off, and the strictness of
//! llama.cpp's server, which answers HTTP 500 to a history replaying unparsable arguments (the
//! scripted server does the same).

mod common;

use common::{tool_results, Harness};
use ryvos::config::MaxTokensField;
use ryvos::testing::Inspect;
use ryvos::{EventKind, RunRequest, RunStatus};
use ryvos_testkit::Reply;
use serde_json::Value;

/// The tool calls replayed in a request's history, as `(id, name, arguments)`.
fn replayed_calls(request: &Value) -> Vec<(String, String, String)> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .map(|c| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (
                text(&c["id"]),
                text(&c["function"]["name"]),
                text(&c["function"]["arguments"]),
            )
        })
        .collect()
}

fn truncations(events: &[std::sync::Arc<ryvos::Event>]) -> Vec<Vec<String>> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::OutputTruncated { cut_calls, .. } => {
                Some(cut_calls.iter().map(|c| c.to_string()).collect())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_call_cut_off_at_the_output_limit_does_not_brick_the_session() {
    let cut = r#"{ "query": "memory_search"#;
    let h = Harness::start(
        vec![
            Reply::tool_calls(&[("c1", "memory_search", cut)]).cut_at_output_limit(),
            Reply::text(&["I will search with a shorter query."]),
            Reply::text(&["Still fine."]),
        ],
        |_| {},
    )
    .await;
    let (events, outcome) = h.run(h.request("find it")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert_eq!(truncations(&events), vec![vec!["c1".to_owned()]]);
    assert!(!outcome.truncated, "the final answer was whole");
    let requests = h.server.requests();
    assert_eq!(requests.len(), 2, "no request was refused and retried");
    // The stored call keeps its text; the wire gets an object.
    assert_eq!(
        replayed_calls(&requests[1]),
        vec![("c1".into(), "memory_search".into(), "{}".into())]
    );
    let results = tool_results(&requests[1]);
    assert!(
        results[0]
            .1
            .starts_with("validation_error: this call was cut off at your output limit"),
        "{results:?}"
    );
    let history = h
        .runtime
        .store()
        .load_session(&outcome.session_id)
        .await
        .unwrap();
    assert!(format!("{history:?}").contains("memory_search"));

    // Resuming replays the same history; the strict server accepts it.
    let again = RunRequest::new("again")
        .workspace(h.workspace.path())
        .session(outcome.session_id.clone());
    let (_, resumed) = h.run(again).await;
    assert_eq!(resumed.status, RunStatus::Completed, "{:?}", resumed.reason);
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn arguments_that_are_not_json_are_answered_and_replayed_as_an_object() {
    let h = Harness::start(
        vec![
            Reply::tool_calls(&[("c1", "read", "path: notes.md"), ("", "", "{}")]),
            Reply::text(&["Sorry."]),
        ],
        |_| {},
    )
    .await;
    let (_, outcome) = h.run(h.request("read the notes")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    let requests = h.server.requests();
    assert_eq!(requests.len(), 2);
    let replayed = replayed_calls(&requests[1]);
    assert_eq!(replayed[0].2, "{}");
    assert!(!replayed[1].1.is_empty(), "a call without a name gets one");
    let results = tool_results(&requests[1]);
    assert!(results[0].1.starts_with("validation_error:"), "{results:?}");
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn a_final_answer_cut_off_at_the_output_limit_is_reported_truncated() {
    let h = Harness::start(
        vec![Reply::text(&["The three reasons are: first, "]).cut_at_output_limit()],
        |_| {},
    )
    .await;
    let (events, outcome) = h.run(h.request("why?")).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert!(outcome.truncated);
    assert_eq!(truncations(&events), vec![Vec::<String>::new()]);
}

#[tokio::test]
async fn the_output_limit_reaches_openai_compatible_servers() {
    for (field, name) in [
        (MaxTokensField::MaxTokens, "max_tokens"),
        (MaxTokensField::MaxCompletionTokens, "max_completion_tokens"),
    ] {
        let h = Harness::start(vec![Reply::text(&["ok"])], |c| {
            c.model.max_output_tokens = 300;
            c.model.max_tokens_field = field;
        })
        .await;
        let (_, outcome) = h.run(h.request("hi")).await;
        assert_eq!(outcome.status, RunStatus::Completed);
        let body = &h.server.requests()[0];
        assert_eq!(body[name], 300, "{body}");
        let other = if name == "max_tokens" {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        assert!(body.get(other).is_none());
    }
}

#[tokio::test]
async fn a_transient_server_error_is_retried_however_alike_its_answers_look() {
    // A real provider's transient 500 says the same thing every time.
    let upstream = "upstream exploded";
    let h = Harness::start(
        vec![
            Reply::error(500, upstream),
            Reply::error(500, upstream),
            Reply::text(&["Recovered."]),
        ],
        |_| {},
    )
    .await;
    let (events, outcome) = h.run(h.request("hi")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert_eq!(outcome.output, "Recovered.");
    let retries = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ModelRetry { .. }))
        .count();
    assert_eq!(retries, 2);
    assert_eq!(h.server.requests().len(), 3);
}

#[tokio::test]
async fn a_server_error_the_request_always_gets_is_given_up_at_once() {
    let said = format!(
        "Failed to parse tool call arguments as JSON: {}",
        "x".repeat(2000)
    );
    let h = Harness::start((0..4).map(|_| Reply::error(500, &said)).collect(), |c| {
        c.model.max_retries = 3
    })
    .await;
    let (events, outcome) = h.run(h.request("hi")).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    assert_eq!(h.server.requests().len(), 1, "not retried");
    assert!(!events
        .iter()
        .any(|e| matches!(e.kind, EventKind::ModelRetry { .. })));
    let reason = outcome.reason.unwrap();
    assert!(
        reason.contains("Failed to parse tool call arguments"),
        "{reason}"
    );
    assert!(reason.len() < 1000, "{} characters: {reason}", reason.len());
}

#[tokio::test]
async fn a_call_cut_before_usage_is_estimated_at_the_whole_request() {
    // The server reports no usage: the estimate counts the system prompt and the tools' specs
    // too, which outweigh a one-word prompt many times over.
    let h = Harness::start(vec![Reply::text(&["ok"]).usage(None)], |_| {}).await;
    let (events, outcome) = h.run(h.request("hi")).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let estimated = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ModelUsage {
                input_tokens,
                estimated: true,
                ..
            } => Some(*input_tokens),
            _ => None,
        })
        .expect("an estimated usage");
    assert!(estimated > 500, "the tools' specs count: {estimated}");
}

#[tokio::test]
async fn a_model_served_on_loopback_is_free_and_raises_no_price_alert() {
    // The scripted server listens on 127.0.0.1 and its model is in no price table: a local
    // model, as llama.cpp or Ollama serve them.
    let h = Harness::start(
        vec![Reply::text(&["Hi."]).usage(Some((100_000, 100_000)))],
        |c| c.budget.per_run_limit_cents = 1,
    )
    .await;
    let (events, outcome) = h.run(h.request("hi")).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.cost_cents, Some(0.0));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, EventKind::GuardianBudgetAlert { .. })),
        "no unknown-price alert for a local model"
    );
    let report = h.runtime.cost_report().await.unwrap();
    assert_eq!(
        (
            report.month.calls,
            report.month.input_tokens,
            report.month.cost_cents
        ),
        (1, 100_000, 0.0),
        "counted, at no cost: {report:?}"
    );
}

#[tokio::test]
async fn a_runs_turns_share_one_connection() {
    // Twenty turns of reads, then an answer: each body is read to its end, so the connection
    // goes back to the pool for the next turn instead of a new one (a TLS handshake, against a
    // real provider).
    // Each body's last chunk comes a moment after its end marker.
    let script = Reply::reads_then(20, "notes", "Done.")
        .into_iter()
        .map(|r| r.linger(std::time::Duration::from_millis(20)))
        .collect();
    let h = Harness::start(script, |c| c.agent.max_turns = 30).await;
    let (_, outcome) = h.run(h.request("read twenty times")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    let captured = h.server.captured();
    assert_eq!(captured.len(), 21);
    let peers: std::collections::HashSet<_> = captured.iter().map(|c| c.peer).collect();
    assert_eq!(peers.len(), 1, "{peers:?}");
}
