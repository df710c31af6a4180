//! A Director run stopped from outside: `cancel` and `interrupt` on its session reach the
//! Director and, through it, the step runs it has in flight; an interrupted Director takes its
//! plan up again when the same task is run again, the interrupted step included.

mod common;

use common::{asked, is_judge, Harness};
use ryvos::testing::Inspect;
use ryvos::{EventKind, RunStatus};
use ryvos_testkit::{Gate, Reply, Router};
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

const PLAN: &str = r#"{"steps": [
    {"id": "a", "goal": "count the apples"},
    {"id": "b", "goal": "count the bananas"}
]}"#;
const ACCEPT: &str = r#"{"verdict": "accept", "reason": "the step is done", "criteria": []}"#;

/// What the tests see of the model: step b's first call is held at `held` (it asks for a
/// tool), and `b_asked` is told when it arrives; everything else answers at once.
struct Script {
    router: Router,
    held: Gate,
    b_asked: Arc<Notify>,
    seen: Arc<Mutex<Vec<String>>>,
}

fn script() -> Script {
    let held = Gate::new();
    let b_asked = Arc::new(Notify::new());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let b_calls = Arc::new(AtomicUsize::new(0));
    let (gate, notify, log) = (held.clone(), b_asked.clone(), seen.clone());
    let router: Router = Arc::new(move |request: &Value| {
        let prompt = asked(request);
        let step = prompt
            .strip_prefix("[Director] You carry out step '")
            .and_then(|rest| rest.split('\'').next());
        let reply = if is_judge(request) {
            Reply::text(&[ACCEPT])
        } else if prompt.starts_with("[Director] Plan how") {
            log.lock().unwrap().push("plan".to_owned());
            Reply::text(&[PLAN])
        } else if step == Some("a") {
            log.lock().unwrap().push("a".to_owned());
            Reply::text(&["3 apples"])
        } else if step == Some("b") && b_calls.fetch_add(1, Ordering::SeqCst) == 0 {
            log.lock().unwrap().push("b".to_owned());
            notify.notify_one();
            Reply::tool_calls(&[("call_b", "glob", r#"{"pattern": "*"}"#)]).held(&gate)
        } else if step == Some("b") {
            log.lock().unwrap().push("b again".to_owned());
            Reply::text(&["4 bananas"])
        } else if prompt.starts_with("[Director] Every step of the plan is done") {
            log.lock().unwrap().push("final".to_owned());
            Reply::text(&["There are 7 fruits."])
        } else {
            return None;
        };
        Some(reply)
    });
    Script {
        router,
        held,
        b_asked,
        seen,
    }
}

/// The status of the last run of step `step`'s session.
async fn step_status(h: &Harness, session: &ryvos::SessionId, step: &str) -> Option<RunStatus> {
    let store = h.runtime.store();
    let plan = store.plan(session).await.unwrap().expect("a stored plan");
    let runs = store.session_runs(&plan.step_session(step)).await.unwrap();
    runs.last().and_then(|r| r.status)
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_on_a_directors_session_stops_the_director_and_its_step_runs_even_after_an_interrupt(
) {
    let s = script();
    let h = Harness::start_routed(Vec::new(), s.router.clone(), |_| {}).await;
    let handle = h
        .runtime
        .run(h.request("how many fruits?").director())
        .await
        .unwrap();
    let session = handle.session_id.clone();
    // Step b's run is waiting on the model.
    s.b_asked.notified().await;

    // An interrupt waits for the held call; a cancel after it stops everything at once.
    assert!(
        h.runtime.interrupt(&session).await.unwrap(),
        "interrupt reaches the Director"
    );
    assert!(
        h.runtime.cancel(&session).await.unwrap(),
        "cancel reaches the Director"
    );
    let outcome = tokio::time::timeout(common::RUN_TIMEOUT, handle.outcome())
        .await
        .expect("the Director ends without its held step being answered")
        .unwrap();
    assert_eq!(outcome.status, RunStatus::Cancelled, "{:?}", outcome.reason);
    assert_eq!(
        step_status(&h, &session, "b").await,
        Some(RunStatus::Cancelled),
        "the step run was cancelled with it"
    );
    assert!(
        !h.runtime.cancel(&session).await.unwrap(),
        "nothing is left in flight on the session"
    );
    s.held.open();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interrupted_director_pauses_its_steps_and_the_same_task_takes_them_up_again() {
    let s = script();
    let h = Harness::start_routed(Vec::new(), s.router.clone(), |_| {}).await;
    let task = "how many fruits?";
    let mut handle = h.runtime.run(h.request(task).director()).await.unwrap();
    let session = handle.session_id.clone();
    // Step a is done; step b's run is waiting on the model.
    while let Some(event) = handle.next_event().await {
        if matches!(
            &event.kind,
            EventKind::DirectorStep { step, status: ryvos::protocol::plan::StepEvent::Completed, .. } if step == "a"
        ) {
            break;
        }
    }
    s.b_asked.notified().await;

    assert!(
        h.runtime.interrupt(&session).await.unwrap(),
        "interrupt reaches the Director"
    );
    // The step pauses after its current step: the model's answer in flight is awaited, and
    // the call it asks for is left pending.
    s.held.open();
    let outcome = handle.outcome().await.unwrap();
    assert_eq!(
        outcome.status,
        RunStatus::Interrupted,
        "{:?}",
        outcome.reason
    );
    assert_eq!(
        step_status(&h, &session, "b").await,
        Some(RunStatus::Interrupted)
    );

    // The same task again: the plan is taken up, step a is not redone, step b runs its
    // pending call and finishes.
    let (events, resumed) = h.run(h.request(task).director().session(session)).await;
    assert_eq!(resumed.status, RunStatus::Completed, "{:?}", resumed.reason);
    assert_eq!(resumed.output, "There are 7 fruits.");
    assert!(events
        .iter()
        .any(|e| matches!(&e.kind, EventKind::DirectorPlan { resumed: true, .. })));
    let seen = s.seen.lock().unwrap().clone();
    assert_eq!(seen.iter().filter(|s| *s == "a").count(), 1, "{seen:?}");
    assert_eq!(seen.last().map(String::as_str), Some("final"), "{seen:?}");
    assert!(seen.contains(&"b again".to_owned()), "{seen:?}");
    let b_again = h
        .server
        .requests()
        .into_iter()
        .filter(|r| asked(r).starts_with("[Director] You carry out step 'b'"))
        .nth(1)
        .expect("step b was asked again");
    let results = common::tool_results(&b_again);
    assert!(
        results.iter().any(|(id, _)| id == "call_b"),
        "the pending call ran first: {results:?}"
    );
}
