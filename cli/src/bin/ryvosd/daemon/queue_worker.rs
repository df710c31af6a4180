//! The daemon's part of the run queue: it claims queued runs while it has room, runs them,
//! and records how they ended. Woken by the store's notifications (a run submitted or put
//! back anywhere in the cluster), and by a tick that also finds the runs of daemons that
//! died: those are claimed again and resumed from their last durable turn.

use super::Shared;
use ryvos::shared_store::Change;
use ryvos::{EngineError, StartRunError};
use ryvos::{RunOutcome, RunRequest, RuntimeError};
use ryvos_protocol::event::RunStatus;
use ryvos_protocol::ids::{QueuedRunId, SessionId};
use ryvos_protocol::records::{QueuedRun, RunRecord};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinSet;

/// The queued runs this daemon is running, and their sessions: `follow` streams their events
/// live.
#[derive(Default)]
pub(crate) struct LocalRuns(Mutex<HashMap<QueuedRunId, SessionId>>);

impl LocalRuns {
    /// The session of queued run `id`, if this daemon runs it.
    pub(crate) fn session(&self, id: &QueuedRunId) -> Option<SessionId> {
        self.lock().get(id).cloned()
    }

    /// How many queued runs this daemon runs.
    pub(crate) fn count(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<QueuedRunId, SessionId>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Claims and runs queued runs until the daemon stops; `None` when the store keeps no queue.
pub(super) fn spawn(shared: Arc<Shared>) -> Option<tokio::task::JoinHandle<()>> {
    let changes = shared.runtime.shared_store().changes()?;
    Some(tokio::spawn(work(shared, changes)))
}

/// How often the daemon looks for work without being told: runs of daemons that died are
/// found this way.
fn tick(shared: &Shared) -> Duration {
    Duration::from_secs(shared.config.store.lease_secs.max(3)) / 3
}

async fn work(shared: Arc<Shared>, mut changes: tokio::sync::broadcast::Receiver<Change>) {
    let limit = shared.config.daemon.max_in_flight_runs.max(1);
    let mut running: JoinSet<()> = JoinSet::new();
    let mut ticks = tokio::time::interval(tick(&shared));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            () = shared.shutdown.cancelled() => break,
            _ = ticks.tick() => {}
            change = changes.recv() => match change {
                Ok(Change::Finished(_) | Change::Relay(_)) => continue,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            },
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
        // Room is shared with the runs clients started here (`ryvos run`).
        let started_here = shared.runtime.runs_in_flight();
        let direct = started_here.saturating_sub(shared.local.count());
        let free = limit.saturating_sub(running.len() + direct);
        if free == 0 {
            continue;
        }
        match shared.runtime.shared_store().claim(free).await {
            Ok(claimed) => {
                if failing {
                    tracing::info!("claiming queued runs works again");
                    failing = false;
                }
                for run in claimed {
                    running.spawn(drive(shared.clone(), run));
                }
            }
            Err(e) => {
                if !failing {
                    tracing::error!("{e}; trying again");
                }
                failing = true;
            }
        }
    }
    // The runtime's shutdown pauses the runs; they put themselves back in the queue.
    while running.join_next().await.is_some() {}
}

/// Runs one claimed run to its end and records how it ended.
async fn drive(shared: Arc<Shared>, run: QueuedRun) {
    let id = run.id.clone();
    let request = match resumption(&shared, &run).await {
        Ok(Resumption::Run(request)) => *request,
        Ok(Resumption::Ended(outcome)) => {
            finish(&shared, &id, &outcome).await;
            return release(&shared, &run).await;
        }
        Err(e) => {
            tracing::error!(run = %id, "{e}; putting it back in the queue");
            return unclaim(&shared, &id, false).await;
        }
    };
    let most = shared.config.store.max_attempts;
    if run.attempts > most {
        let why = format!(
            "given up after {most} attempts ([store] max_attempts): each daemon that started \
             it died, stopped or lost the database before it ended; `ryvos history {}` shows \
             how far it got",
            run.session_id
        );
        tracing::error!(run = %id, "{why}");
        finish(&shared, &id, &refused(&run, why)).await;
        return release(&shared, &run).await;
    }
    let handle = match shared.runtime.run(request).await {
        Ok(handle) => handle,
        // A run of this daemon's own is on the session: it holds the lease.
        Err(RuntimeError::Engine(EngineError::StartRun(StartRunError::SessionBusy(_)))) => {
            return not_now(&shared, &run, false).await
        }
        Err(RuntimeError::Engine(EngineError::StartRun(
            StartRunError::Busy { .. } | StartRunError::Recovering(_) | StartRunError::ShuttingDown,
        ))) => return not_now(&shared, &run, true).await,
        Err(e) => {
            finish(&shared, &id, &refused(&run, e.to_string())).await;
            return release(&shared, &run).await;
        }
    };
    tracing::info!(run = %id, session = %run.session_id, attempt = run.attempts, "queued run started");
    shared
        .local
        .lock()
        .insert(id.clone(), run.session_id.clone());
    let outcome = handle.outcome().await;
    shared.local.lock().remove(&id);
    match outcome {
        // Paused by this daemon's stop: whoever claims it next goes on with it.
        Ok(o) if o.status == RunStatus::Interrupted && shared.shutdown.is_cancelled() => {
            unclaim(&shared, &id, true).await
        }
        // Failed, and the store did not keep even its end (the database is unreachable): once
        // it answers again, the run goes back in the queue and on from its last durable turn.
        Ok(o) if o.status == RunStatus::Failed && !end_stored(&shared, &o).await => {
            tracing::warn!(
                run = %id,
                reason = o.reason.as_deref().unwrap_or_default(),
                "the run failed and its end could not be stored; it goes back in the queue \
                 once the store answers"
            );
            unclaim(&shared, &id, true).await
        }
        Ok(outcome) => finish(&shared, &id, &outcome).await,
        Err(e) => finish(&shared, &id, &refused(&run, e.to_string())).await,
    }
}

/// Whether the end of run `outcome` is stored (a store that cannot answer has not stored it).
async fn end_stored(shared: &Shared, outcome: &RunOutcome) -> bool {
    let store = shared.runtime.shared_store();
    match store.session_runs(&outcome.session_id).await {
        Ok(runs) => runs
            .iter()
            .any(|r| r.run_id == outcome.run_id && r.status.is_some()),
        Err(e) => {
            tracing::warn!(run = %outcome.run_id, "reading whether the run's end is stored: {e}");
            false
        }
    }
}

/// What a claimed run does: start, go on where an earlier attempt stopped, or nothing (an
/// earlier attempt ended and its daemon died before saying so).
enum Resumption {
    Run(Box<RunRequest>),
    Ended(RunOutcome),
}

/// How `run` goes on, from what its session holds of earlier attempts.
async fn resumption(
    shared: &Shared,
    run: &QueuedRun,
) -> Result<Resumption, ryvos::shared_store::StoreError> {
    let mut request = RunRequest::from_params(&run.params).session(run.session_id.clone());
    // Earlier attempts' runs started after the run was first claimed. (Compared across
    // machines: their clocks must agree to well within the time between two runs.)
    let since = run.started_at_ms.unwrap_or(u64::MAX);
    let runs = shared
        .runtime
        .shared_store()
        .session_runs(&run.session_id)
        .await?;
    let earlier: Vec<RunRecord> = runs
        .into_iter()
        .filter(|r| r.started_at_ms >= since)
        .collect();
    Ok(match earlier.last() {
        // Nothing of it was stored: it starts afresh.
        None => Resumption::Run(Box::new(request)),
        // Cut off (its daemon died) or paused: the session goes on from its last durable
        // turn, without the prompt again (it is stored).
        Some(last) if last.status.is_none() || last.status == Some(RunStatus::Interrupted) => {
            request.prompt = String::new();
            Resumption::Run(Box::new(request))
        }
        Some(last) => Resumption::Ended(ended(last)),
    })
}

/// The outcome a stored run record tells.
pub(super) fn ended(record: &RunRecord) -> RunOutcome {
    RunOutcome {
        session_id: record.session_id.clone(),
        run_id: record.run_id.clone(),
        status: record.status.unwrap_or(RunStatus::Failed),
        output: record.output.clone(),
        reason: record.reason.clone(),
        turns: record.turns,
        input_tokens: record.input_tokens,
        output_tokens: record.output_tokens,
        cost_cents: Some(record.cost_cents()),
        duration_ms: record
            .ended_at_ms
            .map_or(0, |end| end.saturating_sub(record.started_at_ms)),
        truncated: false,
        park_reason: record.park_reason,
    }
}

/// The outcome of a run that could not start.
fn refused(run: &QueuedRun, why: String) -> RunOutcome {
    RunOutcome {
        session_id: run.session_id.clone(),
        run_id: ryvos_protocol::ids::RunId::new(run.id.as_str()),
        status: RunStatus::Failed,
        output: String::new(),
        reason: Some(why),
        turns: 0,
        input_tokens: 0,
        output_tokens: 0,
        cost_cents: None,
        duration_ms: 0,
        truncated: false,
        park_reason: None,
    }
}

async fn finish(shared: &Shared, id: &QueuedRunId, outcome: &RunOutcome) {
    let store = shared.runtime.shared_store();
    match until_stored(shared, id, || store.finish(id, outcome)).await {
        Some(true) => tracing::info!(run = %id, status = %outcome.status, "queued run ended"),
        Some(false) => {
            tracing::warn!(run = %id, "the run was taken over by another daemon; its end here is not recorded")
        }
        None => {}
    }
}

/// How long a run this daemon could not start now (full, or its session busy here) stays
/// claimed before it goes back in the queue, so that claiming it again is not a busy loop.
const NOT_NOW_PAUSE: Duration = Duration::from_secs(1);

/// Puts back a run this daemon could not start now, after a pause, and with `let_go` the
/// lease its claim took on its session, so that another daemon may take it.
async fn not_now(shared: &Shared, run: &QueuedRun, let_go: bool) {
    tokio::select! {
        () = tokio::time::sleep(NOT_NOW_PAUSE) => {}
        () = shared.shutdown.cancelled() => {}
    }
    unclaim(shared, &run.id, false).await;
    if let_go {
        release(shared, run).await;
    }
}

/// Lets go of the lease the claim of `run` took on its session.
async fn release(shared: &Shared, run: &QueuedRun) {
    if let Err(e) = shared.runtime.shared_store().release(&run.session_id).await {
        tracing::warn!(run = %run.id, "releasing its session's lease: {e}; it lapses on its own");
    }
}

async fn unclaim(shared: &Shared, id: &QueuedRunId, started: bool) {
    let store = shared.runtime.shared_store();
    until_stored(shared, id, || store.hand_back(id, started)).await;
}

/// The first wait before recording a queued run's fate again, doubled up to the second.
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MOST: Duration = Duration::from_secs(10);

/// `record`'s answer, asked again until the store answers (a run whose fate is not recorded
/// would stay claimed by this live daemon), or `None` once the daemon stops: then the run is
/// taken over by another daemon when this one's heartbeat has stopped.
async fn until_stored<
    T,
    F: std::future::Future<Output = Result<T, ryvos::shared_store::StoreError>>,
>(
    shared: &Shared,
    id: &QueuedRunId,
    record: impl Fn() -> F,
) -> Option<T> {
    let mut pause = RETRY_FIRST;
    let mut said = false;
    loop {
        match record().await {
            Ok(answer) => {
                if said {
                    tracing::info!(run = %id, "the store answers again: the run's fate is recorded");
                }
                return Some(answer);
            }
            Err(e) if shared.shutdown.is_cancelled() => {
                tracing::error!(run = %id, "{e}; another daemon will take the run over");
                return None;
            }
            Err(e) => {
                if !said {
                    tracing::error!(run = %id, "{e}; trying again until the store answers");
                    said = true;
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = shared.shutdown.cancelled() => {}
        }
        pause = (pause * 2).min(RETRY_MOST);
    }
}
