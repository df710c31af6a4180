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

#[tokio::test]
async fn a_session_that_panics_mid_run_ends_its_run_with_a_reason_and_serves_the_next() {
    let h = Harness::start(
        vec![
            Reply::text(&["slow"]).delay(Duration::from_secs(30)),
            Reply::text(&["fresh answer"]),
        ],
        |_| {},
    )
    .await;
    let mut handle = h.runtime.run(h.request("first")).await.unwrap();
    let session = handle.session_id.clone();
    // Wait until the run's model request is in flight, then break its actor.
    let started = handle.next_event().await.unwrap();
    assert!(matches!(started.kind, EventKind::RunStarted));
    tokio::time::timeout(Duration::from_secs(10), h.server.wait_for_requests(1))
        .await
        .expect("the model request left");
    assert!(
        h.runtime
            .engine()
            .inject_session_panic(session.clone())
            .await
    );
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
