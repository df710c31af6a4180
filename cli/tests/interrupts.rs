//! Runs that pause and resume: an interrupt from the host's message callback, `max_turns`, and
//! a shutdown while a call waits for approval. A paused run leaves the calls it did not start
//! pending; the next run on the session executes them before it asks the model anything.

mod common;

use common::{tool_results, Harness};
use ryvos::config::Decision;
use ryvos::testing::{Inspect, LedgerAnswer};
use ryvos::{EventKind, Message, RunRequest, RunStatus};
use ryvos_testkit::Reply;
use serde_json::Value;
use std::sync::Arc;

/// The ids of the calls that ran (`ToolEnd`), in order.
fn ended(events: &[Arc<ryvos::Event>]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolEnd { call_id, .. } => Some(call_id.to_string()),
            _ => None,
        })
        .collect()
}

/// The calls a paused run left, as its `Interrupt` event lists them.
fn left_pending(events: &[Arc<ryvos::Event>]) -> Vec<String> {
    let interrupts: Vec<Vec<String>> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Interrupt { pending_calls, .. } => {
                Some(pending_calls.iter().map(|c| c.to_string()).collect())
            }
            _ => None,
        })
        .collect();
    assert_eq!(interrupts.len(), 1, "one Interrupt event: {events:?}");
    interrupts.into_iter().next().unwrap()
}

/// The roles of a captured request's messages, in order.
fn roles(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_callback_interrupt_after_the_first_of_two_calls_resumes_with_the_second() {
    let h = Harness::start(
        vec![
            Reply::tool_calls(&[
                ("a", "write", r#"{"path": "a.txt", "content": "first"}"#),
                ("b", "write", r#"{"path": "b.txt", "content": "second"}"#),
            ]),
            Reply::text(&["Both written."]),
        ],
        // One call at a time: an interrupt after the first result keeps the second from
        // starting.
        |c| c.agent.parallel_tools = false,
    )
    .await;
    let request = h
        .request("write two files")
        .on_message(|message, interrupter| {
            if matches!(message, Message::ToolResult { .. }) {
                interrupter.interrupt("the host wants to look first");
            }
        });
    let (events, paused) = h.run(request).await;
    assert_eq!(paused.status, RunStatus::Interrupted, "{:?}", paused.reason);
    assert_eq!(
        paused.reason.as_deref(),
        Some("the host wants to look first")
    );
    assert_eq!(ended(&events), ["a"]);
    assert_eq!(left_pending(&events), ["b"]);
    assert!(h.workspace.path().join("a.txt").exists());
    assert!(
        !h.workspace.path().join("b.txt").exists(),
        "b never started"
    );
    assert_eq!(h.server.requests().len(), 1);

    let (events, resumed) = h
        .run(h.request("go on").session(paused.session_id.clone()))
        .await;
    assert_eq!(resumed.status, RunStatus::Completed, "{:?}", resumed.reason);
    assert_eq!(ended(&events), ["b"], "the pending call ran, once");
    // The pending call ran before the model was asked anything.
    let b_done = events
        .iter()
        .position(
            |e| matches!(&e.kind, EventKind::ToolEnd { call_id, .. } if call_id.as_str() == "b"),
        )
        .unwrap();
    let first_delta = events
        .iter()
        .position(|e| matches!(e.kind, EventKind::TextDelta { .. }))
        .unwrap();
    assert!(b_done < first_delta);
    assert_eq!(
        std::fs::read_to_string(h.workspace.path().join("b.txt")).unwrap(),
        "second"
    );
    let requests = h.server.requests();
    assert_eq!(requests.len(), 2);
    // One system prompt, the results right after the answer that asked for them, then the
    // new prompt.
    assert_eq!(
        roles(&requests[1]),
        ["system", "user", "assistant", "tool", "tool", "user"]
    );
    let results: Vec<String> = tool_results(&requests[1])
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(results, ["a", "b"]);
    h.server.assert_no_orphans();
    // A run without a prompt has nothing to continue after an answer, and says so.
    let (_, refused) = h
        .run(RunRequest::continuing(resumed.session_id.clone()).workspace(h.workspace.path()))
        .await;
    assert_eq!(refused.status, RunStatus::Failed);
    assert!(refused.reason.unwrap().contains("nothing to continue"));
    assert_eq!(h.server.requests().len(), 2);
}

#[tokio::test]
async fn max_turns_leaves_the_last_calls_pending_and_each_resume_takes_exactly_its_steps() {
    let glob = |id: &str| Reply::tool_calls(&[(id, "glob", r#"{"pattern": "*"}"#)]);
    let h = Harness::start(
        vec![
            glob("1"),
            glob("2"),
            glob("3"),
            glob("4"),
            glob("5"),
            glob("6"),
        ],
        |c| c.agent.max_turns = 3,
    )
    .await;
    let (events, first) = h.run(h.request("keep looking")).await;
    assert_eq!(first.status, RunStatus::MaxTurns);
    assert_eq!(first.turns, 3);
    assert_eq!(ended(&events), ["1", "2"], "the third turn's call waits");
    assert_eq!(left_pending(&events), ["3"]);
    assert_eq!(h.server.requests().len(), 3);

    // A resume with a prompt: the pending call first, then three more model calls.
    let session = first.session_id.clone();
    let (events, second) = h.run(h.request("go on").session(session.clone())).await;
    assert_eq!(second.status, RunStatus::MaxTurns);
    assert_eq!(second.turns, 3);
    assert_eq!(ended(&events), ["3", "4", "5"]);
    assert_eq!(left_pending(&events), ["6"]);
    assert_eq!(h.server.requests().len(), 6);

    // Continuing without a prompt counts the turns since the last one: the pending call runs,
    // and the limit holds: no further model call.
    let (events, third) = h
        .run(RunRequest::continuing(session).workspace(h.workspace.path()))
        .await;
    assert_eq!(third.status, RunStatus::MaxTurns);
    assert_eq!(third.turns, 0, "its own turns");
    assert_eq!(ended(&events), ["6"]);
    assert_eq!(h.server.requests().len(), 6);
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn a_shutdown_while_a_call_waits_for_approval_keeps_the_request_for_the_next_start() {
    let h = Harness::start(
        vec![
            Reply::tool_calls(&[("w", "write", r#"{"path": "x.txt", "content": "x"}"#)]),
            Reply::text(&["Not written, then."]),
        ],
        |c| c.security.policy.t2 = Decision::Ask,
    )
    .await;
    let mut run = h.runtime.run(h.request("write x")).await.unwrap();
    let request_id = loop {
        let event = run.next_event().await.expect("the run asks");
        if let EventKind::ApprovalRequested { request_id, .. } = &event.kind {
            break request_id.clone();
        }
    };
    let h = h.restart().await;
    let (events, paused) = common::collect(run).await;
    assert_eq!(paused.status, RunStatus::Interrupted, "{:?}", paused.reason);
    assert_eq!(left_pending(&events), ["w"]);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, EventKind::ApprovalResolved { .. })),
        "the request was kept, not resolved"
    );

    // After the restart the request is still listed, and can be answered.
    let listed = h.runtime.pending_approvals();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].request_id, request_id);
    assert!(listed[0].paused);
    h.runtime
        .answer_approval(&request_id, false, Some("not today".into()), "the test")
        .await
        .unwrap();
    let again = h
        .runtime
        .answer_approval(&request_id, true, None, "the test")
        .await;
    assert!(again.is_err(), "one answer per request");

    // The next run applies the answer without asking again.
    let (events, resumed) = h
        .run(h.request("then stop").session(paused.session_id.clone()))
        .await;
    assert_eq!(resumed.status, RunStatus::Completed, "{:?}", resumed.reason);
    assert!(!events
        .iter()
        .any(|e| matches!(e.kind, EventKind::ApprovalRequested { .. })));
    let results = tool_results(&h.server.requests()[1]);
    assert_eq!(results.len(), 1);
    assert!(
        results[0].1.starts_with("denied:") && results[0].1.contains("not today"),
        "{}",
        results[0].1
    );
    assert!(!h.workspace.path().join("x.txt").exists());
    assert!(h.runtime.pending_approvals().is_empty());
    let audit = h.runtime.store().audit(&paused.session_id).await.unwrap();
    assert_eq!(audit.len(), 1, "one decision, made once: {audit:?}");
    assert_eq!(audit[0].request_id.as_deref(), Some(request_id.as_str()));
    assert_eq!(audit[0].decided_by, "the test");
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn a_prompt_held_behind_calls_that_stay_pending_is_not_given_and_says_so() {
    let write = |id: &'static str| (id, "write", r#"{"path": "log.txt", "content": "x"}"#);
    let h = Harness::start(
        vec![
            Reply::tool_calls(&[write("a"), write("b"), write("c")]),
            Reply::text(&["All three."]),
        ],
        |c| c.agent.parallel_tools = false,
    )
    .await;
    let interrupt_after_a_result = |message: &Message, interrupter: &ryvos::Interrupter| {
        if matches!(message, Message::ToolResult { .. }) {
            interrupter.interrupt("one at a time");
        }
    };
    let request = h
        .request("write three times")
        .on_message(interrupt_after_a_result);
    let (events, first) = h.run(request).await;
    assert_eq!(left_pending(&events), ["b", "c"]);

    // The next run pauses again after b: its prompt never reached the model, and it says so.
    let request = h
        .request("first follow-up")
        .session(first.session_id.clone())
        .on_message(interrupt_after_a_result);
    let (events, second) = h.run(request).await;
    assert_eq!(second.status, RunStatus::Interrupted);
    assert_eq!(ended(&events), ["b"]);
    assert_eq!(left_pending(&events), ["c"]);
    assert!(events.iter().any(|e| matches!(
        &e.kind,
        EventKind::Warning { message } if message.contains("prompt was not given")
    )));

    let (_, third) = h
        .run(
            h.request("second follow-up")
                .session(first.session_id.clone()),
        )
        .await;
    assert_eq!(third.status, RunStatus::Completed, "{:?}", third.reason);
    let requests = h.server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        roles(&requests[1]),
        [
            "system",
            "user",
            "assistant",
            "tool",
            "tool",
            "tool",
            "user"
        ]
    );
    let prompts: Vec<&str> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(prompts, ["write three times", "second follow-up"]);
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn a_session_answers_interrupt_and_cancel_while_the_ledger_is_held() {
    let h = Harness::start(
        vec![
            Reply::tool_calls(&[("call_1", "glob", r#"{"pattern": "*"}"#)]),
            Reply::text(&["done"]),
        ],
        |_| {},
    )
    .await;
    let mut ledger = h.runtime.engine().hold_ledger(LedgerAnswer::Receipt);
    let handle = h.runtime.run(h.request("look around")).await.unwrap();
    let session = handle.session_id.clone();
    // The model has answered; the ledger holds back the receipt for its call.
    assert!(ledger.answer_held().await, "the ledger is held");

    assert!(
        h.runtime.interrupt(&session).await.unwrap(),
        "interrupt answered"
    );
    assert!(h.runtime.cancel(&session).await.unwrap(), "cancel answered");
    let outcome = handle.outcome().await.unwrap();
    // Had the session waited for the ledger, the run would have failed for want of a receipt.
    assert_eq!(outcome.status, RunStatus::Cancelled, "{:?}", outcome.reason);

    ledger.release();
    let next = h.run(h.request("and now?").session(session)).await.1;
    assert_eq!(next.status, RunStatus::Completed, "{:?}", next.reason);
    assert_eq!(next.output, "done");
}

#[tokio::test]
async fn a_starting_run_answers_interrupt_and_cancel_while_its_budget_check_is_held() {
    let h = Harness::start(vec![Reply::text(&["done"])], |_| {}).await;
    let mut ledger = h.runtime.engine().hold_ledger(LedgerAnswer::BudgetCheck);
    let handle = h.runtime.run(h.request("look around")).await.unwrap();
    let session = handle.session_id.clone();
    // The run has begun; the ledger holds back whether it may spend.
    assert!(ledger.answer_held().await, "the ledger is held");

    assert!(
        h.runtime.interrupt(&session).await.unwrap(),
        "interrupt answered"
    );
    assert!(h.runtime.cancel(&session).await.unwrap(), "cancel answered");
    let outcome = handle.outcome().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Cancelled, "{:?}", outcome.reason);
    assert_eq!(outcome.turns, 0, "no model call was made");
    assert!(h.server.requests().is_empty(), "the model was never asked");

    ledger.release();
    let next = h.run(h.request("and now?").session(session)).await.1;
    assert_eq!(next.status, RunStatus::Completed, "{:?}", next.reason);
    assert_eq!(next.output, "done");
}
