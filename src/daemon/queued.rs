//! The run queue's methods: `submit`, `runs`, `wait` and `follow`. They read and write the
//! shared store, so they answer the same through any daemon of the cluster.

use super::reply::send;
use super::run_request::{internal, run_request};
use super::Shared;
use crate::protocol::{ErrorBody, ErrorCode, QueuedRunParams, Reply, RunParams, RunsParams};
use crate::runtime::RunOutcome;
use ryvos_engine::{now_ms, Change};
use ryvos_protocol::event::{Event, EventKind};
use ryvos_protocol::ids::{QueuedRunId, SessionId};
use ryvos_protocol::records::{QueueState, QueuedRun};
use std::time::Duration;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::broadcast::error::RecvError;

/// How often a wait looks at the store without being told (a notification can be missed while
/// the store reconnects).
const LOOK_AGAIN: Duration = Duration::from_secs(2);

/// Puts a run in the queue.
pub(super) async fn submit(params: RunParams, shared: &Shared) -> Result<QueuedRun, ErrorBody> {
    // Checked as `run` checks it, so that a bad run is refused now, not when it is claimed.
    let request = run_request(params.clone(), shared).await?;
    if let Some(goal) = &request.goal {
        goal.validate()
            .map_err(|e| ErrorBody::new(ErrorCode::BadRequest, format!("the goal: {e}")))?;
    }
    let run = QueuedRun {
        id: QueuedRunId::generate(),
        session_id: request.session.unwrap_or_else(SessionId::generate),
        params,
        state: QueueState::Queued,
        owner: None,
        attempts: 0,
        submitted_at_ms: now_ms(),
        started_at_ms: None,
        ended_at_ms: None,
        outcome: None,
    };
    let store = shared.runtime.engine.store();
    store.submit_run(&run).await.map_err(|e| {
        let code = if store.changes().is_none() {
            ErrorCode::BadRequest
        } else {
            ErrorCode::Internal
        };
        ErrorBody::new(code, e.to_string())
    })?;
    tracing::info!(run = %run.id, session = %run.session_id, "run submitted");
    Ok(run)
}

/// The queue's runs.
pub(super) async fn runs(params: RunsParams, shared: &Shared) -> Result<Vec<QueuedRun>, ErrorBody> {
    let limit = params.limit.unwrap_or(100).clamp(1, 10_000);
    shared
        .runtime
        .engine
        .store()
        .queued_runs(params.state, limit)
        .await
        .map_err(|e| ErrorBody::new(ErrorCode::BadRequest, e.to_string()))
}

/// The queued run `params` names, which must exist.
async fn find(params: &QueuedRunParams, shared: &Shared) -> Result<QueuedRun, ErrorBody> {
    let id = QueuedRunId::new(params.run.clone());
    match shared.runtime.engine.store().queued_run(&id).await {
        Ok(Some(run)) => Ok(run),
        Ok(None) => Err(ErrorBody::new(
            ErrorCode::NotFound,
            format!("there is no queued run {id}; `ryvos runs` lists them"),
        )),
        Err(e) => Err(ErrorBody::new(ErrorCode::BadRequest, e.to_string())),
    }
}

/// Waits for a queued run's end, until the daemon stops.
pub(super) async fn wait(
    params: QueuedRunParams,
    shared: &Shared,
) -> Result<RunOutcome, ErrorBody> {
    let mut run = find(&params, shared).await?;
    let store = shared.runtime.engine.store();
    let mut changes = store.changes();
    loop {
        if let Some(outcome) = run.outcome.take() {
            return Ok(outcome);
        }
        changed(&mut changes, &run.id, shared).await?;
        run = find(&params, shared).await?;
    }
}

/// Waits until run `id` may have changed: told so, or after a while.
async fn changed(
    changes: &mut Option<tokio::sync::broadcast::Receiver<Change>>,
    id: &QueuedRunId,
    shared: &Shared,
) -> Result<(), ErrorBody> {
    let told = async {
        let Some(changes) = changes.as_mut() else {
            return std::future::pending().await;
        };
        loop {
            match changes.recv().await {
                Ok(Change::Finished(done)) if done == *id => return,
                Ok(Change::Resync) | Err(RecvError::Lagged(_)) => return,
                Ok(_) => {}
                Err(RecvError::Closed) => return std::future::pending().await,
            }
        }
    };
    tokio::select! {
        () = told => Ok(()),
        () = tokio::time::sleep(LOOK_AGAIN) => Ok(()),
        () = shared.shutdown.cancelled() => Err(ErrorBody::new(
            ErrorCode::ShuttingDown,
            "the daemon is stopping; wait again through another one",
        )),
    }
}

/// Streams a queued run's progress to `write` until it ends: its live events while this daemon
/// runs it, a `CheckpointSaved` per stored turn otherwise.
pub(super) async fn follow(
    id: u64,
    params: QueuedRunParams,
    shared: &Shared,
    write: &mut OwnedWriteHalf,
) -> Result<RunOutcome, ErrorBody> {
    let mut run = find(&params, shared).await?;
    let store = shared.runtime.engine.store();
    let mut changes = store.changes();
    let mut live = shared.runtime.subscribe();
    let mut turns_seen = 0;
    loop {
        if let Some(outcome) = run.outcome.take() {
            return Ok(outcome);
        }
        if shared.local.session(&run.id).as_ref() == Some(&run.session_id) {
            // Here: every event of the session as it comes, until the run's end.
            while let Ok(event) = live.recv().await {
                if event.session_id != run.session_id {
                    continue;
                }
                let end = matches!(event.kind, EventKind::RunComplete { .. });
                let reply = Reply::Event {
                    id,
                    event: (*event).clone(),
                };
                if send(write, &reply).await.is_err() || end {
                    break;
                }
            }
        } else {
            let checkpoints = store.checkpoints(&run.session_id).await.map_err(internal)?;
            let since = run.started_at_ms.unwrap_or(u64::MAX);
            let fresh: Vec<_> = checkpoints
                .into_iter()
                .filter(|c| c.at_ms >= since)
                .collect();
            for checkpoint in fresh.iter().skip(turns_seen) {
                let event = Event {
                    session_id: run.session_id.clone(),
                    run_id: checkpoint.run_id.clone(),
                    kind: EventKind::CheckpointSaved {
                        turn: checkpoint.turn,
                    },
                };
                if send(write, &Reply::Event { id, event }).await.is_err() {
                    return Err(ErrorBody::new(ErrorCode::Internal, "the client left"));
                }
            }
            turns_seen = turns_seen.max(fresh.len());
            changed(&mut changes, &run.id, shared).await?;
        }
        run = find(&params, shared).await?;
    }
}
