//! The ReAct loop end to end: a real runtime, real redb, real HTTP to a scripted model server.

mod common;

use common::{deltas, tool_results, Harness};
use ryvos::testing::Inspect;
use ryvos::{EventKind, RunStatus, SafetyTier, Tool, ToolContext, ToolError};
use ryvos_testkit::Reply;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn a_text_answer_streams_in_deltas_and_completes() {
    let h = Harness::start(vec![Reply::text(&["Hel", "lo, ", "wor", "ld"])], |_| {}).await;
    let (events, outcome) = h.run(h.request("say hello")).await;

    assert_eq!(deltas(&events), ["Hel", "lo, ", "wor", "ld"]);
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.output, "Hello, world");
    assert_eq!(outcome.turns, 1);
    assert_eq!((outcome.input_tokens, outcome.output_tokens), (12, 5));
    assert!(matches!(events[0].kind, EventKind::RunStarted { .. }));
    assert!(events
        .iter()
        .any(|e| matches!(e.kind, EventKind::CheckpointSaved { turn: 1 })));
    assert!(events
        .iter()
        .all(|e| e.session_id == outcome.session_id && e.run_id == outcome.run_id));
    let request = &h.server.requests()[0];
    assert_eq!(request["stream"], true);
    assert_eq!(request["messages"][0]["role"], "system");
    assert_eq!(request["messages"][1]["content"], "say hello");
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn a_fragmented_tool_call_runs_and_its_result_is_paired_by_id() {
    let h = Harness::start(
        vec![
            Reply::text_then_tools(
                &["Let me look."],
                &[("call_7", "read", r#"{"path": "notes.txt"}"#)],
            ),
            Reply::text(&["It says hi."]),
        ],
        |_| {},
    )
    .await;
    std::fs::write(h.workspace.path().join("notes.txt"), "hi there\n").unwrap();
    let (events, outcome) = h.run(h.request("what do the notes say?")).await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.turns, 2);
    let start = events.iter().find_map(|e| match &e.kind {
        EventKind::ToolStart {
            call_id,
            name,
            input,
        } => Some((call_id.clone(), name.clone(), input.clone())),
        _ => None,
    });
    let (call_id, name, input) = start.expect("ToolStart");
    assert_eq!((call_id.as_str(), name.as_str()), ("call_7", "read"));
    assert_eq!(input, json!({"path": "notes.txt"}));

    let second = &h.server.requests()[1];
    let assistant = &second["messages"][2];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["tool_calls"][0]["id"], "call_7");
    assert_eq!(
        assistant["tool_calls"][0]["function"]["arguments"],
        r#"{"path": "notes.txt"}"#
    );
    let results = tool_results(second);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].0, "call_7");
    assert!(results[0].1.contains("hi there"), "{}", results[0].1);
    h.server.assert_no_orphans();
}

/// A tool whose calls all wait until `expected` of them have started: it only succeeds when
/// the calls really run at the same time.
struct Rendezvous {
    barrier: Arc<tokio::sync::Barrier>,
}

#[async_trait::async_trait]
impl Tool for Rendezvous {
    fn name(&self) -> &str {
        "rendezvous"
    }
    fn description(&self) -> &str {
        "waits for its siblings"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    }
    fn tier(&self) -> SafetyTier {
        SafetyTier::T0
    }
    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        match tokio::time::timeout(Duration::from_secs(10), self.barrier.wait()).await {
            Ok(_) => Ok(format!("met as {}", input["n"])),
            Err(_) => Err(ToolError::Execution("the other calls never arrived".into())),
        }
    }
}

#[tokio::test]
async fn three_calls_of_one_response_run_concurrently_and_keep_their_order() {
    let barrier = Arc::new(tokio::sync::Barrier::new(3));
    let h = Harness::start_with(
        vec![
            Reply::tool_calls(&[
                ("a", "rendezvous", r#"{"n": 1}"#),
                ("b", "rendezvous", r#"{"n": 2}"#),
                ("c", "rendezvous", r#"{"n": 3}"#),
            ]),
            Reply::text(&["all met"]),
        ],
        |_| {},
        |b| b.tool(Arc::new(Rendezvous { barrier })),
    )
    .await;
    let (_, outcome) = h.run(h.request("meet")).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let results = tool_results(&h.server.requests()[1]);
    assert_eq!(
        results,
        vec![
            ("a".to_string(), "met as 1".to_string()),
            ("b".to_string(), "met as 2".to_string()),
            ("c".to_string(), "met as 3".to_string()),
        ]
    );
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn failed_calls_are_fed_back_with_their_kind_and_the_loop_goes_on() {
    let h = Harness::start(
        vec![
            Reply::tool_calls(&[
                ("u", "teleport", r#"{"to": "mars"}"#),
                ("v", "read", r#"{"path": 42}"#),
                ("t", "read", r#"{"path": "notes.t"#),
                ("x", "bash", r#"{"command": "exit 3"}"#),
            ]),
            Reply::text(&["I will try another way."]),
        ],
        |_| {},
    )
    .await;
    let (events, outcome) = h.run(h.request("do things")).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let results = tool_results(&h.server.requests()[1]);
    let kinds: Vec<&str> = results
        .iter()
        .map(|(_, c)| c.split(':').next().unwrap_or_default())
        .collect();
    assert_eq!(
        kinds,
        [
            "unknown_tool",
            "validation_error",
            "validation_error",
            "execution_error"
        ],
        "{results:#?}"
    );
    assert!(
        results[0].1.contains("read"),
        "lists the tools: {}",
        results[0].1
    );
    assert!(
        results[1].1.contains("/path"),
        "names the field: {}",
        results[1].1
    );
    assert!(results[2].1.contains("not valid JSON"), "{}", results[2].1);
    assert!(results[3].1.contains("status 3"), "{}", results[3].1);
    let errors = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ToolEnd { is_error: true, .. }))
        .count();
    assert_eq!(errors, 4);
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn paths_that_leave_the_workspace_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
    let target = outside.path().join("planted");
    let h = Harness::start(
        vec![
            Reply::tool_calls(&[
                (
                    "r",
                    "read",
                    &json!({"path": outside.path().join("secret")}).to_string(),
                ),
                (
                    "w",
                    "write",
                    &json!({"path": target, "content": "x"}).to_string(),
                ),
                ("d", "read", r#"{"path": "../../../../etc/passwd"}"#),
            ]),
            Reply::text(&["ok"]),
        ],
        |_| {},
    )
    .await;
    std::os::unix::fs::symlink(outside.path(), h.workspace.path().join("link")).unwrap();
    let (_, outcome) = h.run(h.request("escape")).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let results = tool_results(&h.server.requests()[1]);
    for (id, content) in &results {
        assert!(content.starts_with("denied:"), "{id}: {content}");
        assert!(!content.contains("s3cret"));
    }
    assert!(!target.exists(), "nothing was written outside");
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn a_symlink_out_of_the_workspace_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
    let h = Harness::start(
        vec![
            Reply::tool_calls(&[("s", "read", r#"{"path": "link/secret"}"#)]),
            Reply::text(&["ok"]),
        ],
        |_| {},
    )
    .await;
    std::os::unix::fs::symlink(outside.path(), h.workspace.path().join("link")).unwrap();
    h.run(h.request("follow the link")).await;
    let results = tool_results(&h.server.requests()[1]);
    assert!(results[0].1.starts_with("denied:"), "{}", results[0].1);
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn max_turns_stops_the_run_with_its_status() {
    let h = Harness::start(
        vec![
            Reply::tool_calls(&[("1", "glob", r#"{"pattern": "*"}"#)]),
            Reply::tool_calls(&[("2", "glob", r#"{"pattern": "*"}"#)]),
            Reply::text(&["Resumed."]),
        ],
        |c| c.agent.max_turns = 2,
    )
    .await;
    let (_, outcome) = h.run(h.request("loop")).await;
    assert_eq!(outcome.status, RunStatus::MaxTurns);
    assert_eq!(outcome.turns, 2);
    assert!(outcome.reason.unwrap().contains("max_turns (2)"));
    assert_eq!(h.server.requests().len(), 2);
    // The stopped run's calls each have exactly one result: the next run's request is valid.
    let (_, next) = h
        .run(h.request("go on").session(outcome.session_id.clone()))
        .await;
    assert_eq!(next.status, RunStatus::Completed);
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn max_duration_stops_a_running_tool_and_the_history_stays_paired() {
    let h = Harness::start(
        vec![
            Reply::tool_calls(&[("slow", "bash", r#"{"command": "sleep 30"}"#)]),
            Reply::text(&["resumed"]),
        ],
        |c| c.agent.max_duration_secs = 1,
    )
    .await;
    let (events, outcome) = h.run(h.request("wait")).await;
    assert_eq!(outcome.status, RunStatus::Timeout);
    assert!(outcome.reason.unwrap().contains("max_duration_secs (1s)"));
    assert!(events
        .iter()
        .any(|e| matches!(e.kind, EventKind::ToolStart { .. })));

    // The cut-off call has a result, so the session goes on cleanly.
    let (_, next) = h.run(h.request("go on").session(outcome.session_id)).await;
    assert_eq!(next.status, RunStatus::Completed);
    let results = tool_results(&h.server.requests()[1]);
    assert_eq!(results.len(), 1);
    assert!(
        results[0].1.starts_with("execution_error:"),
        "{}",
        results[0].1
    );
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn max_duration_stops_a_silent_model() {
    let h = Harness::start(
        vec![Reply::text(&["too late"]).delay(Duration::from_secs(30))],
        |c| c.agent.max_duration_secs = 1,
    )
    .await;
    let (_, outcome) = h.run(h.request("hello?")).await;
    assert_eq!(outcome.status, RunStatus::Timeout);
    assert_eq!(outcome.turns, 0);
}

#[tokio::test]
async fn a_resumed_session_sees_its_earlier_turns_exactly_once_even_after_a_restart() {
    let h = Harness::start(
        vec![
            Reply::tool_calls(&[("first", "write", r#"{"path": "a.txt", "content": "one"}"#)]),
            Reply::text(&["wrote it"]),
            Reply::text(&["you asked me to write a.txt"]),
        ],
        |_| {},
    )
    .await;
    let (_, first) = h.run(h.request("write a.txt")).await;
    assert_eq!(first.status, RunStatus::Completed);
    let h = h.restart().await;
    let (_, second) = h
        .run(
            h.request("what did I ask?")
                .session(first.session_id.clone()),
        )
        .await;
    assert_eq!(second.status, RunStatus::Completed);
    assert_eq!(second.session_id, first.session_id);

    let request = &h.server.requests()[2];
    let messages = request["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    assert_eq!(messages[1]["content"], "write a.txt");
    assert_eq!(messages[4]["content"], "wrote it");
    assert_eq!(messages[5]["content"], "what did I ask?");
    let history = h
        .runtime
        .store()
        .load_session(&first.session_id)
        .await
        .unwrap();
    assert_eq!(history.messages.len(), 6);
    assert!(history.unfinished_runs.is_empty());
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn a_model_server_error_fails_the_run_with_the_status_and_message() {
    let h = Harness::start(vec![Reply::error(429, "slow down").retry_after(3)], |_| {}).await;
    let (events, outcome) = h.run(h.request("hi")).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    let reason = outcome.reason.unwrap();
    assert!(
        reason.contains("429") && reason.contains("slow down"),
        "{reason}"
    );
    assert!(events
        .iter()
        .any(|e| matches!(e.kind, EventKind::Error { .. })));
}

#[tokio::test]
async fn usage_is_estimated_and_marked_when_the_server_sends_none() {
    let h = Harness::start(
        vec![Reply::text(&["four words right here"]).usage(None)],
        |_| {},
    )
    .await;
    let (events, outcome) = h.run(h.request("count")).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let usage = events.iter().find_map(|e| match &e.kind {
        EventKind::ModelUsage {
            estimated,
            input_tokens,
            output_tokens,
            ..
        } => Some((*estimated, *input_tokens, *output_tokens)),
        _ => None,
    });
    let (estimated, input, output) = usage.expect("ModelUsage");
    assert!(estimated);
    assert!(input > 0 && (3..=8).contains(&output), "{input} {output}");
}

#[tokio::test]
async fn a_session_takes_its_next_run_as_soon_as_the_last_one_reports_its_end() {
    let script = (0..20)
        .map(|i| Reply::text(&[&format!("answer {i}")]))
        .collect();
    let h = Harness::start(script, |_| {}).await;
    let (_, first) = h.run(h.request("run 0")).await;
    for i in 1..20 {
        let (_, outcome) = h
            .run(
                h.request(&format!("run {i}"))
                    .session(first.session_id.clone()),
            )
            .await;
        assert_eq!(outcome.output, format!("answer {i}"));
    }
    let last = h.server.requests().pop().unwrap();
    assert_eq!(last["messages"].as_array().unwrap().len(), 1 + 2 * 20 - 1);
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn a_session_id_that_could_leave_the_logs_directory_is_refused() {
    let h = Harness::start(vec![], |_| {}).await;
    for bad in ["../escape", "/abs", "a b", ""] {
        let refused = h
            .runtime
            .run(h.request("x").session(ryvos::SessionId::new(bad)))
            .await;
        assert!(
            matches!(refused, Err(ryvos::RuntimeError::BadSessionId(_))),
            "{bad:?} was accepted"
        );
    }
    assert!(h.server.requests().is_empty());
}

#[tokio::test]
async fn cancel_stops_a_run_in_flight_for_good() {
    let never = ryvos_testkit::Gate::new();
    let h = Harness::start(vec![Reply::text(&["late"]).held(&never)], |_| {}).await;
    let run = h.runtime.run(h.request("wait")).await.unwrap();
    let session = run.session_id.clone();
    h.server.wait_for_requests(1).await;
    assert!(h.runtime.cancel(&session).await.unwrap());
    let (_, outcome) = common::collect(run).await;
    assert_eq!(outcome.status, RunStatus::Cancelled);
    assert!(
        !h.runtime.cancel(&session).await.unwrap(),
        "nothing is left to cancel"
    );
}

#[tokio::test]
async fn a_reader_that_falls_behind_is_told_how_many_events_it_missed_and_still_sees_the_end() {
    use futures_util::StreamExt;
    use ryvos::RunUpdate;
    use tokio::sync::broadcast::error::RecvError;
    // More deltas than the event buffer holds, while the handle is not read.
    let deltas: Vec<String> = (0..6_000).map(|n| format!("{n} ")).collect();
    let deltas: Vec<&str> = deltas.iter().map(String::as_str).collect();
    let h = Harness::start(vec![Reply::text(&deltas)], |_| {}).await;
    let mut everything = h.runtime.subscribe();
    let mut handle = h.runtime.run(h.request("count")).await.unwrap();
    loop {
        match everything.recv().await {
            Ok(event) if matches!(event.kind, EventKind::RunComplete { .. }) => break,
            Ok(_) | Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => panic!("the runtime's events ended before the run did"),
        }
    }

    let first = handle.next().await.expect("an item");
    let RunUpdate::Lagged(missed) = first else {
        panic!("expected the reader to be told it lagged, got {first:?}");
    };
    assert!(missed > 0);
    let mut last = None;
    while let Some(update) = handle.next().await {
        last = Some(update);
    }
    let Some(RunUpdate::Event(event)) = last else {
        panic!("the stream should end with the run's last event, got {last:?}");
    };
    let EventKind::RunComplete { status, .. } = &event.kind else {
        panic!("the last event should be RunComplete, got {:?}", event.kind);
    };
    assert_eq!(*status, RunStatus::Completed);
    assert!(handle.next().await.is_none(), "nothing after the end");
}

#[tokio::test]
async fn a_runs_turns_share_one_http_connection() {
    // A new connection per turn would cost a TCP (and, to a real provider, a TLS) handshake
    // before every request.
    let h = Harness::start(Reply::reads_then(4, "page", "All read."), |_| {}).await;
    for i in 0..4 {
        std::fs::write(h.workspace.path().join(format!("page{i}.txt")), "a page\n").unwrap();
    }
    let (_, outcome) = h.run(h.request("read every page")).await;

    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    let requests = h.server.captured();
    assert_eq!(requests.len(), 5);
    let first = requests[0].peer.expect("the client's address");
    assert!(
        requests.iter().all(|r| r.peer == Some(first)),
        "{:?}",
        requests.iter().map(|r| r.peer).collect::<Vec<_>>()
    );
}
