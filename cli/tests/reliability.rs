//! Model calls against a misbehaving server: waits the server asks for are honoured, transient
//! failures are retried, rejected requests are not, a second key is really used after a 429, a
//! fallback model answers when the primary is exhausted, a stream cut mid-answer is retried and
//! said so, a malformed chunk fails cleanly, and the Anthropic provider round-trips a tool call.

mod common;

use common::Harness;
use ryvos::{EventKind, RunStatus};
use ryvos_testkit::Reply;
use std::time::Duration;

/// The retry events of a run, as (attempt, wait in ms, discarded text).
fn retries(events: &[std::sync::Arc<ryvos::Event>]) -> Vec<(u32, u64, bool)> {
    events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::ModelRetry {
                attempt,
                wait_ms,
                discarded_text,
                ..
            } => Some((attempt, wait_ms, discarded_text)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_429_with_retry_after_2_waits_at_least_2_seconds() {
    let h = Harness::start(
        vec![
            Reply::error(429, "slow down").retry_after(2),
            Reply::text(&["Done."]),
        ],
        |_| {},
    )
    .await;
    let (events, outcome) = h.run(h.request("go")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert_eq!(retries(&events), [(2, 2000, false)]);
    let seen = h.server.captured();
    assert_eq!(seen.len(), 2);
    let waited = seen[1].at - seen[0].at;
    assert!(waited >= Duration::from_secs(2), "retried after {waited:?}");
}

#[tokio::test]
async fn two_500s_then_an_answer_completes() {
    let h = Harness::start(
        vec![
            Reply::error(500, "oops"),
            Reply::error(500, "oops again"),
            Reply::text(&["Third time."]),
        ],
        |_| {},
    )
    .await;
    let (events, outcome) = h.run(h.request("go")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert_eq!(outcome.output, "Third time.");
    let attempts: Vec<u32> = retries(&events).iter().map(|r| r.0).collect();
    assert_eq!(attempts, [2, 3]);
    assert_eq!(h.server.requests().len(), 3);
}

#[tokio::test]
async fn a_401_fails_in_one_attempt() {
    let h = Harness::start(
        vec![
            Reply::error(401, "invalid api key"),
            Reply::text(&["never"]),
        ],
        |_| {},
    )
    .await;
    let (events, outcome) = h.run(h.request("go")).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    let reason = outcome.reason.unwrap_or_default();
    assert!(
        reason.contains("HTTP 401") && reason.contains("invalid api key"),
        "{reason}"
    );
    assert!(retries(&events).is_empty());
    assert_eq!(h.server.requests().len(), 1);
}

#[tokio::test]
async fn after_a_429_the_retry_carries_the_second_key_and_no_key_is_ever_shown() {
    let h = Harness::start(
        vec![
            Reply::error(429, "rate limited"),
            Reply::text(&["With the second key."]),
        ],
        |c| c.model.api_keys = vec!["sk-first-secret".into(), "sk-second-secret".into()],
    )
    .await;
    let (events, outcome) = h.run(h.request("go")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    let seen = h.server.captured();
    assert_eq!(
        seen[0].header("authorization"),
        Some("Bearer sk-first-secret")
    );
    assert_eq!(
        seen[1].header("authorization"),
        Some("Bearer sk-second-secret")
    );
    let published =
        serde_json::to_string(&events.iter().map(|e| &**e).collect::<Vec<_>>()).unwrap();
    assert!(published.contains("rate limited"), "the 429 was reported");
    assert!(!published.contains("secret"), "{published}");
}

#[tokio::test]
async fn a_fallback_model_answers_once_the_primary_is_exhausted() {
    let h = Harness::start(
        vec![
            Reply::error(503, "overloaded"),
            Reply::error(503, "still overloaded"),
            Reply::text(&["From the fallback."]),
        ],
        |c| {
            c.model.max_retries = 1;
            c.model.fallbacks = vec![ryvos::config::Fallback::Model("backup".into())];
        },
    )
    .await;
    let (events, outcome) = h.run(h.request("go")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    let models: Vec<String> = h
        .server
        .requests()
        .iter()
        .map(|r| r["model"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(models, ["scripted", "scripted", "backup"]);
    assert!(events.iter().any(|e| matches!(
        &e.kind,
        EventKind::ModelFallback { from, to, .. } if from == "scripted" && to == "backup"
    )));
    let answered: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ModelUsage { model, .. } => Some(model.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(answered, ["backup"]);
}

#[tokio::test]
async fn a_stream_cut_after_two_deltas_is_retried_once_and_the_shown_text_is_marked() {
    let h = Harness::start(
        vec![
            // The role chunk and two deltas go out, then the connection breaks.
            Reply::text(&["Hel", "lo", " there"]).cut_after(3),
            Reply::text(&["Hello there."]),
        ],
        |_| {},
    )
    .await;
    let (events, outcome) = h.run(h.request("go")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert_eq!(outcome.output, "Hello there.");
    let shown: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TextDelta { text } => Some(text.clone()),
            EventKind::ModelRetry { .. } => Some("<retry>".into()),
            _ => None,
        })
        .collect();
    assert_eq!(shown, ["Hel", "lo", "<retry>", "Hello there."]);
    assert!(
        retries(&events)[0].2,
        "the client is told the text is discarded"
    );
    assert_eq!(h.server.requests().len(), 2);
    // The cut call may have been billed: it is counted, estimated.
    let estimated = estimated_usages(&events);
    assert_eq!(estimated, 1);
}

#[tokio::test]
async fn a_silent_stream_is_cut_at_its_idle_timeout_and_retried() {
    let h = Harness::start(
        vec![
            Reply::text(&["a", "b"]).pause_between(Duration::from_secs(3)),
            Reply::text(&["Prompt this time."]),
        ],
        |c| c.model.stream_idle_timeout_secs = 1,
    )
    .await;
    let (events, outcome) = h.run(h.request("go")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert_eq!(outcome.output, "Prompt this time.");
    assert!(events.iter().any(|e| matches!(
        &e.kind,
        EventKind::ModelRetry { message, .. } if message.contains("silent")
    )));
}

#[tokio::test]
async fn a_malformed_chunk_fails_cleanly_naming_the_line() {
    let h = Harness::start(
        vec![
            Reply::events(&[
                r#"{"choices": [{"delta": {"content": "ok"}}]}"#,
                "{\"choices\": [oops",
            ]),
            Reply::text(&["never"]),
        ],
        |_| {},
    )
    .await;
    let (_, outcome) = h.run(h.request("go")).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    let reason = outcome.reason.unwrap_or_default();
    assert!(
        reason.contains("malformed") && reason.contains("oops"),
        "{reason}"
    );
    assert_eq!(
        h.server.requests().len(),
        1,
        "a malformed answer is not retried"
    );
}

#[tokio::test]
async fn a_request_too_large_for_the_model_is_pruned_and_made_again() {
    let mut script: Vec<Reply> = (0..8)
        .map(|i| {
            let args = format!(r#"{{"path": "page{i}.txt"}}"#);
            Reply::tool_calls(&[(&format!("r{i}"), "read", &args)])
        })
        .collect();
    script.push(Reply::error(
        400,
        "This model's maximum context length is 4096 tokens. However, your messages resulted in 5000 tokens.",
    ));
    script.push(Reply::text(&["Done."]));
    let h = Harness::start(script, |c| {
        c.agent.max_context_tokens = 8000;
        c.agent.enable_summarization = false;
        c.agent.min_tail = 2;
    })
    .await;
    for i in 0..8 {
        let text = "the quick brown fox jumps\n".repeat(60);
        std::fs::write(h.workspace.path().join(format!("page{i}.txt")), text).unwrap();
    }
    let (events, outcome) = h.run(h.request("read every page")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert!(events
        .iter()
        .any(|e| matches!(e.kind, EventKind::ContextPruned { .. })));
    let requests = h.server.requests();
    let size = |i: usize| requests[i]["messages"].as_array().unwrap().len();
    let n = requests.len();
    assert_eq!(size(n - 2), size(n - 3) + 2, "the rejected request");
    assert!(size(n - 1) < size(n - 2), "the retried request is smaller");
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn an_anthropic_run_with_a_tool_call_round_trips() {
    let h = Harness::start(
        vec![
            Reply::text_then_tools(
                &["Reading."],
                &[("toolu_1", "read", r#"{"path": "a.txt"}"#)],
            ),
            Reply::text(&["It says hello."]),
        ],
        |c| {
            c.model.provider = "anthropic".into();
            c.model.api_key = "sk-ant-test".into();
            c.model.model = "claude-sonnet-4-5".into();
        },
    )
    .await;
    std::fs::write(h.workspace.path().join("a.txt"), "hello").unwrap();
    let (events, outcome) = h.run(h.request("what does a.txt say?")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert_eq!(outcome.output, "It says hello.");
    let seen = h.server.captured();
    assert!(seen.iter().all(|c| c.path == "/v1/messages"), "{seen:?}");
    assert_eq!(seen[0].header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(seen[0].header("anthropic-version"), Some("2023-06-01"));
    let requests = h.server.requests();
    assert!(requests[0]["system"].as_str().unwrap().contains("Ryvos"));
    assert_eq!(requests[0]["tools"][0]["input_schema"]["type"], "object");
    // The second request carries the call and its result as Anthropic blocks.
    let messages = requests[1]["messages"].as_array().unwrap();
    let call = &messages[1]["content"][1];
    assert_eq!(call["type"], "tool_use");
    assert_eq!(call["input"]["path"], "a.txt");
    let result = &messages[2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_1");
    assert!(result["content"].as_str().unwrap().contains("hello"));
    let usage: Vec<(u64, u64)> = events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::ModelUsage {
                input_tokens,
                output_tokens,
                estimated: false,
                ..
            } => Some((input_tokens, output_tokens)),
            _ => None,
        })
        .collect();
    assert_eq!(usage, [(12, 5), (12, 5)]);
}

#[tokio::test]
async fn embeddings_are_retried_after_a_429() {
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = calls.clone();
    let router: ryvos_testkit::Router = std::sync::Arc::new(move |request: &serde_json::Value| {
        let inputs = request.get("input")?.as_array()?;
        if counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            return Some(Reply::error(429, "embeddings rate limited").retry_after(1));
        }
        let data: Vec<serde_json::Value> = (0..inputs.len())
            .map(|index| serde_json::json!({"index": index, "embedding": [1.0, 0.0]}))
            .collect();
        Some(Reply::json(serde_json::json!({ "data": data })))
    });
    let h = Harness::start_routed(vec![Reply::text(&["Hi."])], router, |c| {
        c.embedding.provider = "openai".into();
        c.embedding.api_key = String::new();
    })
    .await;
    let (events, outcome) = h.run(h.request("hello")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Warning { .. })),
        "the recall's embeddings succeeded on the retry"
    );
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_wait_past_the_cap_is_not_waited_for_and_text_shown_before_a_fallback_is_marked() {
    let h = Harness::start(
        vec![
            // Asks for two minutes: more than max_retry_after_secs (60).
            Reply::error(429, "come back later").retry_after(120),
            Reply::text(&["From the fallback."]),
        ],
        |c| c.model.fallbacks = vec![ryvos::config::Fallback::Model("backup".into())],
    )
    .await;
    let (events, outcome) = h.run(h.request("go")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert!(retries(&events).is_empty(), "no wait of 120 s was begun");
    assert!(events.iter().any(|e| matches!(
        &e.kind,
        EventKind::ModelFallback { message, discarded_text: false, .. }
            if message.contains("asked to wait 120s")
    )));

    // The primary streams some text, then its stream breaks and it has no retries left.
    let h = Harness::start(
        vec![
            Reply::text(&["Par", "tial", " answer"]).cut_after(3),
            Reply::text(&["Whole answer."]),
        ],
        |c| {
            c.model.max_retries = 0;
            c.model.fallbacks = vec![ryvos::config::Fallback::Model("backup".into())];
        },
    )
    .await;
    let (events, outcome) = h.run(h.request("go")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert_eq!(outcome.output, "Whole answer.");
    assert!(events.iter().any(|e| matches!(
        e.kind,
        EventKind::ModelFallback {
            discarded_text: true,
            ..
        }
    )));
    // The cut call is counted (estimated) under the model that was cut.
    let billed: Vec<(&str, bool)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ModelUsage {
                model, estimated, ..
            } => Some((model.as_str(), *estimated)),
            _ => None,
        })
        .collect();
    assert_eq!(billed, [("scripted", true), ("backup", false)]);
}

#[tokio::test]
async fn cut_attempts_are_billed_even_when_the_call_fails() {
    let h = Harness::start(
        vec![
            Reply::text(&["a", "b", "c"]).cut_after(2),
            Reply::text(&["a", "b", "c"]).cut_after(2),
        ],
        |c| c.model.max_retries = 1,
    )
    .await;
    let (events, outcome) = h.run(h.request("go")).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    let reason = outcome.reason.unwrap_or_default();
    // Both attempts failed the same way: told once, with how many they were.
    assert!(reason.contains("2 attempts failed: scripted: "), "{reason}");
    let estimated = estimated_usages(&events);
    assert_eq!(estimated, 2);
}

/// How many model calls were billed by estimate (cut before the server reported usage).
fn estimated_usages(events: &[std::sync::Arc<ryvos::Event>]) -> usize {
    events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::ModelUsage {
                    estimated: true,
                    ..
                }
            )
        })
        .count()
}
