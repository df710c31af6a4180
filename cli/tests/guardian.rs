//! The Guardian against a scripted model: doom loops get a hint the model sees, the
//! edit–test–fix cycle is left alone, a silent stream is cut, the token budget warns then stops,
//! and a restarted Guardian goes on where it stood.

mod common;

use common::{Harness, RUN_TIMEOUT};
use ryvos::protocol::event::{BudgetScope, GuardianAction, StallPhase};
use ryvos::testing::Inspect;
use ryvos::testing::{ChildKind, SupervisorNotice};
use ryvos::{Event, EventKind, RunStatus};
use ryvos_testkit::{Gate, Reply};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

const FAILING: &str = r#"{"command": "echo 'npm ERR! missing script: test'; exit 1"}"#;

/// The system messages (the Guardian's hints) a captured request carries.
fn hints_in(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .skip(1) // the system prompt
        .filter_map(|m| m["content"].as_str()?.strip_prefix("[System] "))
        .map(str::to_owned)
        .collect()
}

fn guardian_events(events: &[Arc<Event>]) -> Vec<&EventKind> {
    events
        .iter()
        .map(|e| &e.kind)
        .filter(|k| {
            matches!(
                k,
                EventKind::GuardianHint { .. }
                    | EventKind::GuardianDoomLoop { .. }
                    | EventKind::GuardianStall { .. }
                    | EventKind::BudgetWarning { .. }
                    | EventKind::BudgetExceeded { .. }
            )
        })
        .collect()
}

#[tokio::test]
async fn the_same_failing_call_three_times_puts_a_hint_in_the_fourth_request() {
    let h = Harness::start(
        vec![
            Reply::tool_calls(&[("c1", "bash", FAILING)]),
            Reply::tool_calls(&[("c2", "bash", FAILING)]),
            Reply::tool_calls(&[("c3", "bash", FAILING)]),
            Reply::text(&["There is no test script; I will say so."]),
        ],
        |_| {},
    )
    .await;
    let (events, outcome) = h.run(h.request("run the tests")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);

    let requests = h.server.requests();
    assert_eq!(requests.len(), 4);
    for r in &requests[..3] {
        assert!(hints_in(r).is_empty(), "no hint before the loop: {r:#}");
    }
    let hints = hints_in(&requests[3]);
    assert_eq!(hints.len(), 1, "{hints:?}");
    assert!(
        hints[0].contains("'bash'") && hints[0].contains("3 times") && hints[0].contains("failed"),
        "{}",
        hints[0]
    );
    let seen = guardian_events(&events);
    assert!(
        matches!(
            seen[..],
            [
                EventKind::GuardianDoomLoop {
                    repeats: 3,
                    failed: true,
                    action: GuardianAction::Hint,
                    ..
                },
                EventKind::GuardianHint { level: 1, .. }
            ]
        ),
        "{seen:?}"
    );
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn a_loop_that_ignores_the_hints_is_stopped_with_a_summary() {
    let h = Harness::start(
        (1..=5)
            .map(|i| Reply::tool_calls(&[(&format!("c{i}"), "bash", FAILING)]))
            .chain([Reply::text(&["never asked for"])])
            .collect(),
        |_| {},
    )
    .await;
    let (events, outcome) = h.run(h.request("run the tests")).await;
    assert_eq!(outcome.status, RunStatus::Escalated);
    let reason = outcome.reason.unwrap_or_default();
    assert!(
        reason.contains("5 times") && reason.contains("Guardian"),
        "{reason}"
    );
    assert!(
        outcome.output.contains("stopped after 5 turn(s)"),
        "{}",
        outcome.output
    );
    assert_eq!(h.server.requests().len(), 5, "no model call after the stop");
    let actions: Vec<GuardianAction> = events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::GuardianDoomLoop { action, .. } => Some(action),
            _ => None,
        })
        .collect();
    assert_eq!(
        actions,
        [
            GuardianAction::Hint,
            GuardianAction::StrongerHint,
            GuardianAction::Stop
        ]
    );
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn the_edit_test_fix_cycle_is_never_flagged() {
    let test = r#"{"command": "grep -q v6 lib.txt || { echo 'test failed'; exit 1; }"}"#;
    let mut script = Vec::new();
    for i in 0..6 {
        let edit = format!(
            r#"{{"path": "lib.txt", "old_string": "v{i}", "new_string": "v{}"}}"#,
            i + 1
        );
        script.push(Reply::tool_calls(&[(&format!("e{i}"), "edit", &edit)]));
        script.push(Reply::tool_calls(&[(&format!("t{i}"), "bash", test)]));
    }
    script.push(Reply::text(&["Fixed: the tests pass."]));
    let h = Harness::start(script, |_| {}).await;
    std::fs::write(h.workspace.path().join("lib.txt"), "v0").unwrap();
    let (events, outcome) = h.run(h.request("make the tests pass")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert_eq!(outcome.turns, 13);
    assert!(
        guardian_events(&events).is_empty(),
        "{:?}",
        guardian_events(&events)
    );
    assert!(h.server.requests().iter().all(|r| hints_in(r).is_empty()));
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn a_stream_silent_past_the_stall_timeout_is_cut_retried_and_reported() {
    let h = Harness::start(
        vec![
            Reply::text(&["Thinking", " about it"]).pause_between(Duration::from_secs(30)),
            Reply::text(&["The answer is 4."]),
        ],
        |c| c.agent.guardian.stall_timeout_secs = 1,
    )
    .await;
    let (events, outcome) = h.run(h.request("what is 2 + 2?")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert_eq!(outcome.output, "The answer is 4.");
    assert_eq!(h.server.requests().len(), 2);
    let stall = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::GuardianStall {
                phase,
                action,
                silent_secs,
                message,
            } => Some((*phase, *action, *silent_secs, message.clone())),
            _ => None,
        })
        .expect("a GuardianStall event");
    assert_eq!(
        (stall.0, stall.1),
        (StallPhase::Model, GuardianAction::Retry)
    );
    assert!(stall.2 >= 1 && stall.3.contains("silent"), "{stall:?}");
    // The cut call is paid for too: its input, estimated, then the retried call as reported.
    let usage: Vec<(u32, bool)> = events
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::ModelUsage {
                turn, estimated, ..
            } => Some((turn, estimated)),
            _ => None,
        })
        .collect();
    assert_eq!(usage, [(1, true), (1, false)]);
}

#[tokio::test]
async fn a_stream_that_stalls_again_fails_the_run_with_a_reason() {
    let silent = || Reply::text(&["a", "b"]).pause_between(Duration::from_secs(30));
    let h = Harness::start(vec![silent(), silent()], |c| {
        c.agent.guardian.stall_timeout_secs = 1
    })
    .await;
    let (_, outcome) = h.run(h.request("hello")).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    assert!(
        outcome
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("silent"),
        "{:?}",
        outcome.reason
    );
}

#[tokio::test]
async fn soft_and_hard_token_thresholds_fire_at_the_turn_that_crosses_them() {
    let page = "lorem ipsum dolor sit amet ".repeat(60);
    let script: Vec<Reply> = (0..12)
        .map(|i| {
            let args = format!(r#"{{"path": "page{i}.txt"}}"#);
            Reply::tool_calls(&[(&format!("r{i}"), "read", &args)])
        })
        .chain([Reply::text(&["never reached"])])
        .collect();
    let h = Harness::start(script, |c| {
        c.agent.max_context_tokens = 4000;
        c.agent.guardian.token_budget_soft = 50;
        c.agent.guardian.token_budget_hard = 80;
        // Nothing may be pruned, so the hard limit is not relieved and stops the run.
        c.agent.min_tail = 100;
    })
    .await;
    for i in 0..12 {
        std::fs::write(h.workspace.path().join(format!("page{i}.txt")), &page).unwrap();
    }
    let (events, outcome) = h.run(h.request("read every page")).await;
    assert_eq!(
        outcome.status,
        RunStatus::TokenBudgetExceeded,
        "{:?}",
        outcome.reason
    );

    // The turn each threshold fired at: the number of model calls answered before it.
    let fired_at = |wanted: fn(&EventKind) -> bool| {
        let mut turns = 0;
        for e in &events {
            match &e.kind {
                EventKind::ModelUsage { .. } => turns += 1,
                k if wanted(k) => return turns,
                _ => {}
            }
        }
        panic!("the event never came")
    };
    let warned = fired_at(|k| {
        matches!(
            k,
            EventKind::BudgetWarning {
                scope: BudgetScope::Tokens,
                ..
            }
        )
    });
    let stopped = fired_at(|k| {
        matches!(
            k,
            EventKind::BudgetExceeded {
                scope: BudgetScope::Tokens,
                ..
            }
        )
    });
    // The turns that crossed each threshold, from the sizes the store recorded.
    let session = ryvos::SessionId::new(outcome.session_id.as_str());
    let sizes: Vec<(u32, u64)> = h
        .runtime
        .store()
        .checkpoints(&session)
        .await
        .unwrap()
        .iter()
        .map(|c| (c.turn, c.context_tokens))
        .collect();
    let first_over = |limit: u64| sizes.iter().find(|(_, size)| *size >= limit).unwrap().0;
    assert_eq!(warned, first_over(2000), "{sizes:?}");
    assert_eq!(stopped, first_over(3200), "{sizes:?}");
    assert!(warned < stopped, "{sizes:?}");
    assert_eq!(
        outcome.turns, stopped,
        "the run stops after the turn that crossed"
    );
    assert_eq!(h.server.requests().len() as u32, stopped);
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn a_restarted_guardian_remembers_the_calls_it_saw_before() {
    let gate = Gate::new();
    let h = Harness::start(
        vec![
            Reply::tool_calls(&[("c1", "bash", FAILING)]),
            Reply::tool_calls(&[("c2", "bash", FAILING)]),
            Reply::tool_calls(&[("c3", "bash", FAILING)]).held(&gate),
            Reply::text(&["Done."]),
        ],
        |_| {},
    )
    .await;
    let mut notices = h.runtime.engine().supervisor_notices();
    let handle = h
        .runtime
        .run(h.request("run the tests"))
        .await
        .expect("run accepted");
    let run = tokio::spawn(common::collect(handle));
    // Two identical failures are reviewed; the Guardian dies before the third.
    h.server.wait_for_requests(3).await;
    h.runtime.engine().inject_panic(ChildKind::Guardian);
    tokio::time::timeout(RUN_TIMEOUT, async {
        while notices.recv().await.expect("notices")
            != (SupervisorNotice::Restarted {
                child: ChildKind::Guardian,
            })
        {}
    })
    .await
    .expect("the Guardian restarts");
    gate.open();
    let (_, outcome) = run.await.unwrap();
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    let hints = hints_in(&h.server.requests()[3]);
    assert!(
        hints.len() == 1 && hints[0].contains("3 times"),
        "the restarted Guardian counted the calls from before its restart: {hints:?}"
    );
    h.server.assert_no_orphans();
}
