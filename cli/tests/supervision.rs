//! Supervision: actors made to panic are restarted with backoff, runs in flight end with a
//! reason, and the runtime keeps serving; too many failures escalate.

mod common;

use common::Harness;
use ryvos::testing::Inspect;
use ryvos::testing::{ChildKind, SupervisorNotice};
use ryvos::{EventKind, RunStatus};
use ryvos_testkit::Reply;
use std::time::Duration;
use tokio::sync::broadcast;

async fn next_notice(notices: &mut broadcast::Receiver<SupervisorNotice>) -> SupervisorNotice {
    tokio::time::timeout(Duration::from_secs(10), notices.recv())
        .await
        .expect("a supervisor notice in time")
        .expect("the notice stream is open")
}

#[tokio::test]
async fn each_engine_actor_is_restarted_with_backoff_and_the_runtime_keeps_serving() {
    let script = (0..3).map(|_| Reply::text(&["still here"])).collect();
    let h = Harness::start(script, |_| {}).await;
    let mut notices = h.runtime.engine().supervisor_notices();
    for kind in [
        ChildKind::LlmStream,
        ChildKind::ToolExecutor,
        ChildKind::Checkpoint,
    ] {
        h.runtime.engine().inject_panic(kind);
        match next_notice(&mut notices).await {
            SupervisorNotice::Restarting {
                child,
                attempt,
                after,
                why,
            } => {
                assert_eq!(child, kind);
                assert_eq!(attempt, 1);
                // The first backoff is the configured 20 ms, jittered down to no less than half.
                assert!(
                    after >= Duration::from_millis(10) && after <= Duration::from_millis(20),
                    "{after:?}"
                );
                assert!(why.contains("injected fault"), "{why}");
            }
            other => panic!("expected a restart, got {other:?}"),
        }
        assert_eq!(
            next_notice(&mut notices).await,
            SupervisorNotice::Restarted { child: kind }
        );
        let (_, outcome) = h.run(h.request("are you there?")).await;
        assert_eq!(
            outcome.status,
            RunStatus::Completed,
            "after restarting {kind:?}"
        );
    }
    assert!(h.runtime.is_running());
}

/// A run in flight whose session breaks as `driver` says: its actor (the run goes on), or
/// the run's own driver (the run ends). Returns the handle and the session.
async fn break_mid_run(h: &Harness, driver: bool) -> (ryvos::RunHandle, ryvos::SessionId) {
    let mut handle = h.runtime.run(h.request("first")).await.unwrap();
    let session = handle.session_id.clone();
    // Wait until the run's model request is in flight, then break it.
    let started = handle.next_event().await.unwrap();
    assert!(matches!(started.kind, EventKind::RunStarted { .. }));
    tokio::time::timeout(Duration::from_secs(10), h.server.wait_for_requests(1))
        .await
        .expect("the model request left");
    let engine = h.runtime.engine();
    assert!(engine.inject_session_panic(session.clone(), driver).await);
    (handle, session)
}

#[tokio::test]
async fn a_run_whose_driver_panics_ends_with_a_reason_and_the_session_serves_the_next() {
    let h = Harness::start(
        vec![
            Reply::text(&["slow"]).delay(Duration::from_secs(30)),
            Reply::text(&["fresh answer"]),
        ],
        |_| {},
    )
    .await;
    let (handle, session) = break_mid_run(&h, true).await;
    let outcome = tokio::time::timeout(Duration::from_secs(20), handle.outcome())
        .await
        .expect("the run ends, never hangs")
        .unwrap();
    assert_eq!(outcome.status, RunStatus::Failed);
    let reason = outcome.reason.unwrap();
    assert!(reason.contains("panicked"), "{reason}");

    let (_, next) = h.run(h.request("second").session(session.clone())).await;
    assert_eq!(next.status, RunStatus::Completed);
    assert_eq!(next.output, "fresh answer");
    let runs = h.runtime.store().session_runs(&session).await.unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].status, Some(RunStatus::Failed));
    assert_eq!(runs[1].status, Some(RunStatus::Completed));
}

#[tokio::test]
async fn a_session_actor_that_panics_mid_run_is_restarted_and_the_run_goes_on() {
    let h = Harness::start(
        vec![
            Reply::text(&["answer after the fault"]).delay(Duration::from_secs(2)),
            Reply::text(&["the next run"]),
        ],
        |_| {},
    )
    .await;
    let (handle, session) = break_mid_run(&h, false).await;
    let outcome = tokio::time::timeout(Duration::from_secs(20), handle.outcome())
        .await
        .expect("the run ends, never hangs")
        .unwrap();
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert_eq!(outcome.output, "answer after the fault");

    let (_, next) = h.run(h.request("second").session(session.clone())).await;
    assert_eq!(next.status, RunStatus::Completed);
    assert_eq!(next.output, "the next run");
    let runs = h.runtime.store().session_runs(&session).await.unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|r| r.status == Some(RunStatus::Completed)));
}

#[tokio::test]
async fn failing_past_the_intensity_limit_escalates() {
    let h = Harness::start(vec![], |c| {
        c.supervision.max_restarts = 1;
        c.supervision.restart_window_secs = 60;
    })
    .await;
    let mut notices = h.runtime.engine().supervisor_notices();
    h.runtime.engine().inject_panic(ChildKind::ToolExecutor);
    assert!(matches!(
        next_notice(&mut notices).await,
        SupervisorNotice::Restarting { .. }
    ));
    assert!(matches!(
        next_notice(&mut notices).await,
        SupervisorNotice::Restarted { .. }
    ));
    h.runtime.engine().inject_panic(ChildKind::ToolExecutor);
    match next_notice(&mut notices).await {
        SupervisorNotice::GaveUp { child, why } => {
            assert_eq!(child, ChildKind::ToolExecutor);
            assert!(why.contains("2 times"), "{why}");
        }
        other => panic!("expected escalation, got {other:?}"),
    }
    // The notice is sent just before the root stops; its stop follows.
    tokio::time::timeout(Duration::from_secs(10), h.runtime.stopped())
        .await
        .expect("the runtime stops after escalation");
}

#[tokio::test]
async fn a_stop_asked_as_a_run_starts_reaches_it() {
    let h = Harness::start(
        vec![Reply::text(&["too late"]).delay(Duration::from_secs(30))],
        |_| {},
    )
    .await;
    // At once: the session's actor may not have started the run's driver yet.
    let handle = h.runtime.run(h.request("first")).await.unwrap();
    let stopped = h.runtime.cancel(&handle.session_id).await.unwrap();
    assert!(stopped, "the run was in flight");
    let outcome = tokio::time::timeout(Duration::from_secs(20), handle.outcome())
        .await
        .expect("the run ends, never hangs")
        .unwrap();
    assert_eq!(outcome.status, RunStatus::Cancelled, "{:?}", outcome.reason);
}
