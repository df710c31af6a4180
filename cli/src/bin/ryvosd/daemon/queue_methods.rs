//! The run queue's methods: `submit`, `runs`, `wait` and `follow`. They read and write the
//! shared store, so they answer the same through any daemon of the cluster.

use super::attended::attended;
use super::reply::{send, EventLines};
use super::run_request::{run_error, run_request};
use super::streaming::final_outcome;
use super::Shared;
use ryvos::protocol::{ErrorBody, ErrorCode, QueuedRunParams, Reply, RunParams, RunsParams};
use ryvos::shared_store::{now_ms, Change, SharedStore};
use ryvos::RunOutcome;
use ryvos_protocol::event::{Event, EventKind};
use ryvos_protocol::ids::{QueuedRunId, RunId, SessionId};
use ryvos_protocol::records::{QueueState, QueuedRun};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::broadcast::error::RecvError;

/// How often a wait looks at the store without being told (a notification can be missed while
/// the store reconnects).
const LOOK_AGAIN: Duration = Duration::from_secs(2);

/// Puts a run in the queue.
pub(super) async fn submit(params: RunParams, shared: &Shared) -> Result<QueuedRun, ErrorBody> {
    if params.config.is_some() {
        return Err(ErrorBody::new(
            ErrorCode::BadRequest,
            "config is for run: a queued run is hosted by whichever daemon claims it, on that \
             daemon's config",
        ));
    }
    if params.editor_files || !params.mcp_servers.is_empty() {
        return Err(ErrorBody::new(
            ErrorCode::BadRequest,
            "editor_files and mcp_servers are for run: they need the caller there as the run \
             goes, and a queued run's caller is not",
        ));
    }
    // Checked as `run` checks it, so that a bad run is refused now, not when it is claimed.
    let request = run_request(params.clone(), shared).await?;
    request.validate().map_err(run_error)?;
    // Where it works is settled now (the caller's directory for a new session given none),
    // not by whichever daemon claims it.
    let mut params = params;
    if params.workspace.is_none() {
        params.workspace = (request.workspace.as_ref()).map(|w| w.display().to_string());
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
    let store = shared.runtime.shared_store();
    store.submit(&run).await.map_err(|e| {
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
        .shared_store()
        .queued_runs(params.state, limit)
        .await
        .map_err(|e| ErrorBody::new(ErrorCode::BadRequest, e.to_string()))
}

/// The queued run `params` names, which must exist.
async fn find(params: &QueuedRunParams, shared: &Shared) -> Result<QueuedRun, ErrorBody> {
    let id = QueuedRunId::new(params.run.clone());
    match shared.runtime.shared_store().queued_run(&id).await {
        Ok(Some(run)) => Ok(run),
        Ok(None) => Err(not_found(&id)),
        Err(e) => Err(ErrorBody::new(ErrorCode::BadRequest, e.to_string())),
    }
}

fn not_found(id: &QueuedRunId) -> ErrorBody {
    ErrorBody::new(
        ErrorCode::NotFound,
        format!("there is no queued run {id}; `ryvos runs` lists them"),
    )
}

/// How long a wait goes on while the store cannot be read (a database restarting), before it
/// gives up saying why.
const STORE_PATIENCE: Duration = Duration::from_secs(60);

/// The run a wait is waiting for, read again; a store that cannot be read is asked again
/// until [`STORE_PATIENCE`] runs out.
async fn again(
    params: &QueuedRunParams,
    shared: &Shared,
    write: &OwnedWriteHalf,
) -> Result<QueuedRun, ErrorBody> {
    let id = QueuedRunId::new(params.run.clone());
    let store = shared.runtime.shared_store();
    let mut failing_since: Option<tokio::time::Instant> = None;
    loop {
        let error = match store.queued_run(&id).await {
            Ok(Some(run)) => return Ok(run),
            Ok(None) => return Err(not_found(&id)),
            Err(e) => e,
        };
        let since = *failing_since.get_or_insert_with(|| {
            tracing::warn!(run = %id, "{error}; waiting for the store to answer");
            tokio::time::Instant::now()
        });
        if since.elapsed() > STORE_PATIENCE {
            return Err(ErrorBody::new(
                ErrorCode::Internal,
                format!(
                    "{error}; the run's end could not be read for {}s: wait again once the \
                     store answers",
                    STORE_PATIENCE.as_secs()
                ),
            ));
        }
        attended(tokio::time::sleep(LOOK_AGAIN), shared, write).await?;
    }
}

/// Waits for a queued run's end, until the daemon stops or the client leaves.
pub(super) async fn wait(
    id: u64,
    params: QueuedRunParams,
    shared: &Shared,
    write: &mut OwnedWriteHalf,
) -> Result<RunOutcome, ErrorBody> {
    let mut run = find(&params, shared).await?;
    let store = shared.runtime.shared_store();
    let mut changes = store.changes();
    loop {
        if let Some(outcome) = run.outcome.take() {
            // A run that parked is waited through, and the client told.
            return final_outcome(id, outcome, (None, true), write, shared).await;
        }
        attended(changed(&mut changes, &run.id), shared, write).await?;
        run = again(&params, shared, write).await?;
    }
}

/// Waits until run `id` may have changed: told so, or after a while.
async fn changed(changes: &mut Option<tokio::sync::broadcast::Receiver<Change>>, id: &QueuedRunId) {
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
        () = told => {}
        () = tokio::time::sleep(LOOK_AGAIN) => {}
    }
}

/// Streams a queued run's progress to `write` until it ends: its live events while this daemon
/// runs it, a `CheckpointSaved` per stored turn otherwise. Each turn is told once, whichever
/// way it came, and nothing after the run's end but its outcome.
pub(super) async fn follow(
    id: u64,
    params: QueuedRunParams,
    shared: &Shared,
    write: &mut OwnedWriteHalf,
) -> Result<RunOutcome, ErrorBody> {
    // Subscribed first, so that no event comes between the look at the run and the stream.
    let mut live = shared.runtime.subscribe();
    let mut run = find(&params, shared).await?;
    let store = shared.runtime.shared_store();
    let mut changes = store.changes();
    let mut told = Told::new(id);
    loop {
        if !told.ended {
            // What was stored before this looked, or while it was not looking: turns stored
            // just before the run's end among them.
            told.stored_turns(&run, &store, write).await?;
        }
        if let Some(outcome) = run.outcome.take() {
            let announce = !told.park_seen;
            let lines = Some(&mut told.lines);
            return final_outcome(id, outcome, (lines, announce), write, shared).await;
        }
        let here = shared.local.session(&run.id).as_ref() == Some(&run.session_id);
        if here && !told.ended {
            told.live_events(&run, &mut live, shared, write).await?;
        } else {
            attended(changed(&mut changes, &run.id), shared, write).await?;
        }
        run = again(&params, shared, write).await?;
    }
}

/// What a `follow` has told its client.
struct Told {
    id: u64,
    lines: EventLines,
    /// The turns told, by run: the live stream and the store may both have one.
    turns: HashSet<(RunId, u32)>,
    park_seen: bool,
    /// The run's end came on the live stream: its outcome is all that is left to tell.
    ended: bool,
}

impl Told {
    fn new(id: u64) -> Self {
        Self {
            id,
            lines: EventLines::new(id),
            turns: HashSet::new(),
            park_seen: false,
            ended: false,
        }
    }

    /// Every event of the run's session as it comes, until the run's end, a quiet while (the
    /// run may have ended before this looked) or missed events (the store is looked at again).
    async fn live_events(
        &mut self,
        run: &QueuedRun,
        live: &mut tokio::sync::broadcast::Receiver<Arc<Event>>,
        shared: &Shared,
        write: &mut OwnedWriteHalf,
    ) -> Result<(), ErrorBody> {
        loop {
            let next = tokio::time::timeout(LOOK_AGAIN, live.recv());
            let Ok(Ok(event)) = attended(next, shared, write).await? else {
                return Ok(());
            };
            if event.session_id != run.session_id {
                continue;
            }
            match &event.kind {
                // Told already, from the store.
                EventKind::CheckpointSaved { turn }
                    if !self.turns.insert((event.run_id.clone(), *turn)) =>
                {
                    continue
                }
                EventKind::RunParked { .. } => self.park_seen = true,
                EventKind::RunComplete { .. } => self.ended = true,
                _ => {}
            }
            if self.lines.push(&event).is_err() || self.lines.flush(write).await.is_err() {
                return Err(client_left());
            }
            if self.ended {
                return Ok(());
            }
        }
    }

    /// A `CheckpointSaved` for each turn of the run stored and not yet told.
    async fn stored_turns(
        &mut self,
        run: &QueuedRun,
        store: &SharedStore,
        write: &mut OwnedWriteHalf,
    ) -> Result<(), ErrorBody> {
        let Some(since) = run.started_at_ms else {
            return Ok(());
        };
        let checkpoints = match store.checkpoints(&run.session_id).await {
            Ok(checkpoints) => checkpoints,
            // Read again at the next look.
            Err(e) => {
                tracing::warn!(run = %run.id, "following: {e}");
                return Ok(());
            }
        };
        let ran = run.outcome.as_ref().map(|o| &o.run_id);
        for checkpoint in checkpoints {
            let of_run = ran.is_none_or(|r| *r == checkpoint.run_id);
            let key = (checkpoint.run_id, checkpoint.turn);
            if checkpoint.at_ms < since || !of_run || !self.turns.insert(key.clone()) {
                continue;
            }
            let event = Event {
                session_id: run.session_id.clone(),
                run_id: key.0,
                kind: EventKind::CheckpointSaved { turn: key.1 },
            };
            let reply = Reply::Event { id: self.id, event };
            if send(write, &reply).await.is_err() {
                return Err(client_left());
            }
        }
        Ok(())
    }
}

fn client_left() -> ErrorBody {
    ErrorBody::new(ErrorCode::Internal, "the client left")
}
