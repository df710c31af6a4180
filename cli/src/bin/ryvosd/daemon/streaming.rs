//! Runs followed over a connection: `run`, `continue` and `stop` stream the run's events as
//! they come, then its outcome. A run that parks is waited through: the client hears
//! `RunParked` and keeps following, until the run is continued (from anywhere on this
//! daemon) and ends, or is stopped.

use super::attended::attended;
use super::reply::{send, EventLines};
use super::run_request::{run_error, run_request};
use super::Shared;
use futures_util::FutureExt;
use ryvos::protocol::event::ParkReason;
use ryvos::protocol::{
    ContinueParams, ErrorBody, ErrorCode, Method, Reply, RunIdParams, RunParams,
};
use ryvos::{Event, EventKind, RunHandle, RunOutcome, RuntimeError};
use ryvos_protocol::ids::{RunId, SessionId};
use ryvos_protocol::records::RunRecord;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::broadcast::{error::RecvError, Receiver};

/// Answers `run`, `continue` or `stop` (`method`) with the run's events, then its outcome.
pub(super) async fn answer(
    id: u64,
    method: Method,
    write: &mut OwnedWriteHalf,
    shared: &Shared,
) -> std::io::Result<()> {
    match method {
        Method::Run(params) => run(id, *params, write, shared).await,
        Method::Continue(params) => continue_run(id, params, write, shared).await,
        Method::Stop(params) => stop(id, params, write, shared).await,
        _ => unreachable!("only the methods that follow a run are answered here"),
    }
}

/// Starts the run `params` asks for and streams its events to the client, then its outcome.
async fn run(
    id: u64,
    params: RunParams,
    write: &mut OwnedWriteHalf,
    shared: &Shared,
) -> std::io::Result<()> {
    let started = match run_request(params, shared).await {
        Ok(request) => shared.runtime.run(request).await.map_err(run_error),
        Err(error) => Err(error),
    };
    follow(id, started, write, shared).await
}

/// Continues a parked run and streams it as `run` does.
async fn continue_run(
    id: u64,
    params: ContinueParams,
    write: &mut OwnedWriteHalf,
    shared: &Shared,
) -> std::io::Result<()> {
    let started = match run_id(&params.run) {
        Ok(run) => (shared.runtime)
            .continue_run(&run, params.budget_cents)
            .await
            .map_err(parked_error),
        Err(error) => Err(error),
    };
    follow(id, started, write, shared).await
}

/// Ends a run (a parked one where it parked, one in flight cancelled) and streams its end.
async fn stop(
    id: u64,
    params: RunIdParams,
    write: &mut OwnedWriteHalf,
    shared: &Shared,
) -> std::io::Result<()> {
    let started = match run_id(&params.run) {
        Ok(run) => shared.runtime.stop_run(&run).await.map_err(parked_error),
        Err(error) => Err(error),
    };
    follow(id, started, write, shared).await
}

/// A run id as a client gave it, checked.
pub(super) fn run_id(given: &str) -> Result<RunId, ErrorBody> {
    if RunId::is_well_formed(given) {
        Ok(RunId::new(given))
    } else {
        Err(ErrorBody::new(
            ErrorCode::BadRequest,
            format!(
                "'{given}' is not a run id (r_…): `ryvos sessions` shows each session's latest run"
            ),
        ))
    }
}

/// A parked run that cannot be continued or stopped, as the socket answers it.
pub(super) fn parked_error(e: RuntimeError) -> ErrorBody {
    match e {
        RuntimeError::NoSuchRun(_) => ErrorBody::new(ErrorCode::NotFound, e.to_string()),
        RuntimeError::NotParked(_) => ErrorBody::new(ErrorCode::BadRequest, e.to_string()),
        other => run_error(other),
    }
}

/// Streams the run `started` gave (or says why it did not start), then its outcome.
async fn follow(
    id: u64,
    started: Result<RunHandle, ErrorBody>,
    write: &mut OwnedWriteHalf,
    shared: &Shared,
) -> std::io::Result<()> {
    let handle = match started {
        Ok(handle) => handle,
        Err(error) => return send(write, &Reply::Error { id, error }).await,
    };
    let (session, run) = (handle.session_id.clone(), handle.run_id.clone());
    tracing::info!(%session, %run, "run started");
    let mut lines = EventLines::new(id);
    let (outcome, parked) = stream(handle, &mut lines, write, shared).await?;
    let outcome = match (outcome, parked) {
        (Some(o), Some(live)) if !o.status.is_end() => {
            tracing::info!(%session, %run, "run parked; following it until it ends");
            match through_parks((&session, &run), live, Some(&mut lines), write, shared).await {
                Ok(outcome) => Some(outcome),
                Err(error) => return send(write, &Reply::Error { id, error }).await,
            }
        }
        (outcome, _) => outcome,
    };
    match &outcome {
        Some(o) => tracing::info!(
            %session,
            %run,
            status = %o.status,
            duration_ms = o.duration_ms,
            "run ended"
        ),
        None => tracing::warn!(%session, %run, "run ended without reporting its outcome"),
    }
    let reply = match outcome {
        Some(o) => Reply::result(id, &o),
        None => Reply::Error {
            id,
            error: ErrorBody::new(
                ErrorCode::Internal,
                "the run's events ended without its outcome",
            ),
        },
    };
    send(write, &reply).await
}

/// Sends the run's events as they come; its outcome, and (if it parked) the daemon's event
/// stream, subscribed as it parked, to follow it through the park. A client that leaves does
/// not stop the run: it goes on, and is stored.
async fn stream(
    mut handle: RunHandle,
    lines: &mut EventLines,
    write: &mut OwnedWriteHalf,
    shared: &Shared,
) -> std::io::Result<(Option<RunOutcome>, Option<Receiver<Arc<Event>>>)> {
    let mut outcome = None;
    let mut parked = None;
    let mut client_gone = false;
    while let Some(event) = handle.next_event().await {
        let mut ready = Some(event);
        // The events already waiting join this one's write.
        while let Some(event) = ready {
            if matches!(event.kind, EventKind::RunParked { .. }) {
                // Before the client hears of it: its continue comes after.
                parked = Some(shared.runtime.subscribe());
            }
            outcome = RunOutcome::from_event(&event).or(outcome);
            client_gone = client_gone || lines.push(&event).is_err();
            ready = match lines.full() {
                true => None,
                false => handle.next_event().now_or_never().flatten(),
            };
        }
        client_gone = client_gone || lines.flush(write).await.is_err();
    }
    if client_gone {
        return Err(std::io::Error::new(
            std::io::ErrorKind::BrokenPipe,
            "the client left",
        ));
    }
    Ok((outcome, parked))
}

/// How often a wait through a park looks at the run's record, where daemons share the store:
/// another daemon may continue the run, and its events are not heard here.
const LOOK_ACROSS_DAEMONS: Duration = Duration::from_secs(30);

/// Follows the parked `run` of `session` on the daemon's event stream until it ends for good
/// (it may park again meanwhile), sending its events; its outcome. The wait ends on the run's
/// events, the client leaving or the daemon stopping; its record is looked at only when events
/// were missed, and, where daemons share the store, every [`LOOK_ACROSS_DAEMONS`].
pub(super) async fn through_parks(
    (session, run): (&SessionId, &RunId),
    mut live: Receiver<Arc<Event>>,
    mut lines: Option<&mut EventLines>,
    write: &mut OwnedWriteHalf,
    shared: &Shared,
) -> Result<RunOutcome, ErrorBody> {
    // Alone on its store, nothing but this daemon's events can end the wait: no timer.
    let look_every = match shared.runtime.shared_store().node() {
        Some(_) => LOOK_ACROSS_DAEMONS,
        None => Duration::MAX,
    };
    loop {
        let next = attended(tokio::time::timeout(look_every, live.recv()), shared, write)
            .await
            .map_err(|e| still_parked(run, e))?;
        let event = match next {
            Ok(Ok(event)) if event.run_id == *run => event,
            Ok(Ok(_)) => continue,
            Ok(Err(RecvError::Closed)) => {
                return Err(ErrorBody::new(
                    ErrorCode::ShuttingDown,
                    format!("the daemon is stopping; run {run} stays parked"),
                ))
            }
            // Events missed, or quiet for a while: the record says whether it ended.
            lagged_or_quiet => {
                if let Ok(Err(RecvError::Lagged(n))) = lagged_or_quiet {
                    tracing::warn!(%run, "following a parked run, {n} events were missed");
                }
                match stored_end(shared, session, run).await {
                    Some(outcome) => return Ok(outcome),
                    None => continue,
                }
            }
        };
        if let Some(lines) = lines.as_deref_mut() {
            if lines.push(&event).is_err() || lines.flush(write).await.is_err() {
                return Err(ErrorBody::new(ErrorCode::Internal, "the client left"));
            }
        }
        let Some(outcome) = RunOutcome::from_event(&event).filter(|o| o.status.is_end()) else {
            continue;
        };
        // A continue that could not start ends without touching the record: still parked.
        match stored_end(shared, session, run).await {
            Some(_) => return Ok(outcome),
            None => tracing::info!(%run, "a continue did not start; the run stays parked"),
        }
    }
}

/// The end run `run` of `session` has on record, once it has ended for good.
pub(super) async fn stored_end(
    shared: &Shared,
    session: &SessionId,
    run: &RunId,
) -> Option<RunOutcome> {
    match run_record(shared, session, run).await {
        Ok(record) => record
            .filter(|r| r.status.is_some_and(|s| s.is_end()))
            .map(|r| super::queue_worker::ended(&r)),
        Err(e) => {
            tracing::warn!(%run, "reading whether a run has ended: {e}");
            None
        }
    }
}

/// Run `run`'s record, if it has one yet.
pub(super) async fn run_record(
    shared: &Shared,
    session: &SessionId,
    run: &RunId,
) -> Result<Option<RunRecord>, ryvos::shared_store::StoreError> {
    let runs = shared.runtime.shared_store().session_runs(session).await?;
    Ok(runs.into_iter().find(|r| r.run_id == *run))
}

/// How the run `outcome` tells of ended for good: `outcome` itself, unless it parked; then its
/// record's end if it went on and ended since, else its end once it comes (sending its events
/// with `lines`). Request `id` is told of the park first (`announce`), unless it was already.
pub(super) async fn final_outcome(
    id: u64,
    outcome: RunOutcome,
    (lines, announce): (Option<&mut EventLines>, bool),
    write: &mut OwnedWriteHalf,
    shared: &Shared,
) -> Result<RunOutcome, ErrorBody> {
    if outcome.status.is_end() {
        return Ok(outcome);
    }
    if announce {
        let event = Event {
            session_id: outcome.session_id.clone(),
            run_id: outcome.run_id.clone(),
            kind: EventKind::RunParked {
                reason: outcome.park_reason.unwrap_or(ParkReason::BudgetRun),
                message: outcome.reason.clone().unwrap_or_default(),
            },
        };
        if send(write, &Reply::Event { id, event }).await.is_err() {
            return Err(ErrorBody::new(ErrorCode::Internal, "the client left"));
        }
    }
    // Subscribed before the record is read, so that an end between the two is heard.
    let live = shared.runtime.subscribe();
    let (session, run) = (&outcome.session_id, &outcome.run_id);
    match stored_end(shared, session, run).await {
        Some(ended) => Ok(ended),
        None => through_parks((session, run), live, lines, write, shared).await,
    }
}

/// `error` (the daemon stopping, the client leaving) while `run` was parked, saying where it
/// stands.
fn still_parked(run: &RunId, mut error: ErrorBody) -> ErrorBody {
    if error.code == ErrorCode::ShuttingDown {
        error.message = format!(
            "the daemon is stopping; run {run} stays parked: `ryvos continue {run}` goes on with \
             it once a daemon runs"
        );
    }
    error
}
