//! Actor chaos: while runs are in flight, panics are injected at random into every kind of
//! actor (checkpoint writer, cost ledger, Guardian, model streams, tool executor, Judge, and
//! the sessions themselves). Every run must end, completed or failed with a reason; none may
//! hang; and a crash is a transient fault: all runs but one at most complete. Restarts back off, the runtime keeps serving, and afterwards every session resumes
//! with a history in which each call has exactly one result.
//!
//! The faults are paced by the runs' own events, not by timers; the seed is printed, and
//! `RYVOS_CHAOS_SEED` replays it, `RYVOS_CHAOS_FAULTS` sets how many are injected, and
//! `RYVOS_CHAOS_ONLY=checkpoint` (or another kind, as `ChildKind` names it in lower case)
//! injects them into that kind of actor alone.

mod common;

use common::{collect, Harness};
use rand::{Rng, SeedableRng};
use ryvos::protocol::goal::{Criterion, CriterionKind, CriterionOrigin, Goal};
use ryvos::testing::repair;
use ryvos::testing::Inspect;
use ryvos::testing::{ChildKind, SupervisorNotice};
use ryvos::{RunStatus, SessionId};
use ryvos_testkit::Reply;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const RUNS: usize = 16;
const TOOL_TURNS: usize = 3;

/// After each prompt: `TOOL_TURNS` turns that write a file, then an answer with "done".
fn model() -> ryvos_testkit::Router {
    let next_call = Arc::new(AtomicU64::new(1));
    Arc::new(move |request: &Value| {
        let since_prompt = common::answers_since_prompt(request);
        if since_prompt >= TOOL_TURNS {
            return Some(Reply::text(&["All ", "done."]));
        }
        let n = next_call.fetch_add(1, Ordering::Relaxed);
        let (id, args) = (
            format!("c{n}"),
            format!(r#"{{"path": "f{n}.txt", "content": "{n}"}}"#),
        );
        Some(Reply::text_then_tools(
            &["Writing."],
            &[(&id, "write", &args)],
        ))
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn panics_in_every_actor_kind_end_every_run_with_a_status_and_lose_nothing() {
    let faults = common::env_setting("RYVOS_CHAOS_FAULTS", 40);
    let seed = common::env_setting("RYVOS_CHAOS_SEED", u64::from(rand::random::<u32>()));
    eprintln!("chaos: {faults} faults, seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let h = Harness::start_routed(Vec::new(), model(), |c| {
        c.supervision.max_restarts = 10_000;
        c.supervision.restart_window_secs = 60;
    })
    .await;
    let engine = h.runtime.engine();
    let mut notices = engine.supervisor_notices();
    let mut events = engine.subscribe();
    let mut handles = Vec::new();
    for n in 0..RUNS {
        let mut request = h.request(&format!("task {n}"));
        if n % 4 == 0 {
            // Some runs are goal-driven, so the Judge is at work too.
            request = request.goal(Goal {
                description: "finish".into(),
                criteria: vec![Criterion {
                    kind: CriterionKind::Contains,
                    value: "done".into(),
                    weight: 1.0,
                    origin: CriterionOrigin::User,
                }],
                constraints: Default::default(),
            });
        }
        handles.push(h.runtime.run(request).await.unwrap());
    }
    let sessions: Vec<SessionId> = handles.iter().map(|r| r.session_id.clone()).collect();
    let runs: Vec<_> = handles
        .into_iter()
        .map(|r| tokio::spawn(collect(r)))
        .collect();

    let only = std::env::var("RYVOS_CHAOS_ONLY").ok();
    let kinds: Vec<ChildKind> = [
        ChildKind::Checkpoint,
        ChildKind::CostLedger,
        ChildKind::Guardian,
        ChildKind::LlmStream,
        ChildKind::ToolExecutor,
        ChildKind::Judge,
    ]
    .into_iter()
    .filter(|k| {
        only.as_ref()
            .is_none_or(|o| format!("{k:?}").eq_ignore_ascii_case(o))
    })
    .collect();
    let sessions_too = only.is_none();
    let mut restarts = Restarts::default();
    let mut sessions_failed = 0;
    for _ in 0..faults {
        // Between faults, a random number of the runs' events (while any are still coming).
        for _ in 0..rng.random_range(1..=12) {
            if tokio::time::timeout(Duration::from_millis(250), events.recv())
                .await
                .is_err()
            {
                break;
            }
        }
        let pick = rng.random_range(0..kinds.len() + usize::from(sessions_too));
        if pick == kinds.len() {
            let session = sessions[rng.random_range(0..sessions.len())].clone();
            sessions_failed += usize::from(engine.inject_session_panic(session, false).await);
        } else {
            // Into a running incarnation, so every fault lands and is accounted for.
            restarts.settle(&mut notices, Some(kinds[pick])).await;
            engine.inject_panic(kinds[pick]);
            *restarts.injected.entry(kinds[pick]).or_default() += 1;
        }
    }
    restarts.settle(&mut notices, None).await;
    eprintln!(
        "chaos: injected {:?} and {sessions_failed} session faults",
        restarts.injected
    );

    let mut ended: HashMap<RunStatus, usize> = HashMap::new();
    let mut reasons: HashMap<String, usize> = HashMap::new();
    for run in runs {
        let (events, outcome) = run.await.expect("a run's follower never panics");
        // Every turn the run was told is durable is in the store.
        let stored = h
            .runtime
            .store()
            .checkpoints(&outcome.session_id)
            .await
            .unwrap();
        for event in &events {
            if let ryvos::EventKind::CheckpointSaved { turn } = event.kind {
                assert!(
                    stored
                        .iter()
                        .any(|c| c.run_id == outcome.run_id && c.turn == turn),
                    "turn {turn} of {} was confirmed durable but is not stored",
                    outcome.run_id
                );
            }
        }
        if outcome.status != RunStatus::Completed {
            let reason = outcome.reason.clone().unwrap_or_default();
            assert!(
                outcome.status == RunStatus::Failed && !reason.is_empty(),
                "a run ended {} without a reason: {reason:?}",
                outcome.status
            );
        }
        *ended.entry(outcome.status).or_default() += 1;
        if let Some(reason) = outcome.reason {
            // Whole: a failure is read from its reason (a stream's cut says why at its end).
            *reasons.entry(reason).or_default() += 1;
        }
    }
    eprintln!("chaos: runs ended {ended:?}, for {reasons:#?}");
    assert!(h.runtime.is_running(), "the runtime survived");
    // A crashed actor is a transient fault: the run it served goes on once it is back (a model
    // call lost with its actor is asked again, a session actor's run keeps its driver).
    let completed = ended.get(&RunStatus::Completed).copied().unwrap_or(0);
    assert!(
        completed + 1 >= RUNS,
        "only {completed} of {RUNS} runs completed: {reasons:#?}"
    );

    // Restarts backed off: every restart waited, and repeated ones waited longer.
    let last_wait = &restarts.last_wait;
    for (child, (attempt, wait)) in last_wait {
        if *attempt >= 3 {
            assert!(
                *wait > Duration::from_millis(20),
                "{child:?}'s restart {attempt} waited only {wait:?}"
            );
        }
    }

    // Every session resumes, and nothing is orphaned or lost.
    for session in &sessions {
        let (_, outcome) = collect(resume(&h, session).await).await;
        assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
        let history = h.runtime.store().load_session(session).await.unwrap();
        let fault = repair::check(history.messages.iter().map(|m| m.message.as_ref()));
        assert!(fault.is_clean(), "session {session}: {fault:?}");
    }
    h.server.assert_no_orphans();
}

/// Starts a run on `session`, which may still be coming back from its own fault.
async fn resume(h: &Harness, session: &SessionId) -> ryvos::RunHandle {
    for _ in 0..250 {
        match h
            .runtime
            .run(h.request("once more").session(session.clone()))
            .await
        {
            Ok(handle) => return handle,
            Err(e) if e.to_string().contains("recover") => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => panic!("session {session} refused a run: {e}"),
        }
    }
    panic!("session {session} did not come back");
}

/// The root's restarts as the test follows them: faults injected, failures and restarts
/// announced, and the wait before each child's latest restart.
#[derive(Default)]
struct Restarts {
    injected: HashMap<ChildKind, u32>,
    failed: HashMap<ChildKind, u32>,
    back: HashMap<ChildKind, u32>,
    last_wait: HashMap<ChildKind, (u32, Duration)>,
}

impl Restarts {
    fn settled(&self, kind: ChildKind) -> bool {
        let n = |m: &HashMap<ChildKind, u32>| m.get(&kind).copied().unwrap_or(0);
        n(&self.injected) == n(&self.failed) && n(&self.failed) == n(&self.back)
    }

    /// Follows the notices until `kind` (or every kind) has failed for each fault injected
    /// into it and is running again.
    async fn settle(
        &mut self,
        notices: &mut tokio::sync::broadcast::Receiver<SupervisorNotice>,
        kind: Option<ChildKind>,
    ) {
        loop {
            let done = match kind {
                Some(kind) => self.settled(kind),
                None => self.injected.keys().all(|k| self.settled(*k)),
            };
            if done {
                return;
            }
            let notice = tokio::time::timeout(Duration::from_secs(10), notices.recv())
                .await
                .expect("every fault is followed by a restart")
                .unwrap();
            self.note(notice);
        }
    }

    fn note(&mut self, notice: SupervisorNotice) {
        match notice {
            SupervisorNotice::Restarting {
                child,
                attempt,
                after,
                ..
            } => {
                assert!(
                    after >= Duration::from_millis(10),
                    "{child:?} restarted at once"
                );
                *self.failed.entry(child).or_default() += 1;
                let (max_attempt, wait) =
                    self.last_wait.entry(child).or_insert((0, Duration::ZERO));
                if attempt > *max_attempt {
                    (*max_attempt, *wait) = (attempt, after);
                }
            }
            SupervisorNotice::Restarted { child } => *self.back.entry(child).or_default() += 1,
            SupervisorNotice::GaveUp { child, why } => {
                panic!("{child:?} escalated below the limit: {why}")
            }
        }
    }
}
