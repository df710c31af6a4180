//! `follow` and `wait` of a run (`r_…`) or a session (`s_…`), on any store: a second terminal
//! watching a run this daemon hosts, however it was started. `follow` streams the run's events
//! from now on (the turns it stored before, as `CheckpointSaved` events, first), then its
//! outcome; `wait` only the outcome. A run that parks is followed through the park (`wait`
//! is told of it by a `RunParked` line), as `run` is. A run that has ended is answered at once
//! from its record; one that is neither in flight nor ended (a crash cut it off) is refused.
//! (A queued run's id, `q_…`, is answered by the queue's methods.)

use super::attended::attended;
use super::reply::EventLines;
use super::streaming::final_outcome;
use super::Shared;
use ryvos::protocol::{ErrorBody, ErrorCode, QueuedRunParams};
use ryvos::{RunOutcome, RunStatus};
use ryvos_protocol::ids::{RunId, SessionId};
use tokio::net::unix::OwnedWriteHalf;

/// Whether `params` name a run or a session rather than a queued run (`q_…`).
pub(super) fn watches(params: &QueuedRunParams) -> bool {
    !params.run.starts_with("q_")
}

/// Follows the run `params` names (or its session's run in flight, or latest) to its end,
/// streaming its events when `stream`; its outcome.
pub(super) async fn follow(
    id: u64,
    params: QueuedRunParams,
    stream: bool,
    shared: &Shared,
    write: &mut OwnedWriteHalf,
) -> Result<RunOutcome, ErrorBody> {
    let Found { session, run, here } = find(&params.run, shared).await?;
    // Subscribed before the record is read, so that an end between the two is heard.
    let mut handle = shared.runtime.follow(&session, &run);
    let live = shared.runtime.subscribe();
    let record = (super::streaming::run_record(shared, &session, &run).await)
        .map_err(|e| ErrorBody::new(ErrorCode::Internal, format!("following: {e}")))?;
    let mut lines = EventLines::new(id);
    match record.as_ref().and_then(|r| r.status) {
        Some(status) if status.is_end() => return Ok(super::queue_worker::ended(&record.unwrap())),
        // Waiting for a person: told so, and waited through.
        Some(RunStatus::Parked) => {
            let parked = super::queue_worker::ended(&record.unwrap());
            let lines = stream.then_some(&mut lines);
            return final_outcome(id, parked, (lines, true), write, shared).await;
        }
        _ => {}
    }
    tracing::info!(%session, %run, "a client follows the run");
    if stream {
        told_so_far(&mut lines, (&session, &run), shared, write).await?;
    }
    if !here {
        if shared.runtime.shared_store().node().is_none() {
            // Alone on its store, only this daemon runs its runs: this one will never end.
            return Err(ErrorBody::new(
                ErrorCode::NotFound,
                format!(
                    "run {run} is not in flight and never ended: a crash cut it off. `ryvos run \
                     --resume {session}` goes on with its session"
                ),
            ));
        }
        // Another daemon may run it: its end is read from the store as it comes.
        let lines = stream.then_some(&mut lines);
        return super::streaming::through_parks((&session, &run), live, lines, write, shared).await;
    }
    loop {
        let Some(event) = attended(handle.next_event(), shared, write).await? else {
            return Err(ErrorBody::new(
                ErrorCode::Internal,
                format!("run {run}'s events ended without its end"),
            ));
        };
        if stream {
            let sent = lines.push(&event).is_ok() && lines.flush(write).await.is_ok();
            if !sent {
                return Err(ErrorBody::new(ErrorCode::Internal, "the client left"));
            }
        }
        if let Some(outcome) = RunOutcome::from_event(&event) {
            // A park was streamed already; `wait` is told of it.
            let lines = stream.then_some(&mut lines);
            return final_outcome(id, outcome, (lines, !stream), write, shared).await;
        }
    }
}

/// Tells the turns of `run` stored so far, as `CheckpointSaved` events, in order.
async fn told_so_far(
    lines: &mut EventLines,
    (session, run): (&SessionId, &RunId),
    shared: &Shared,
    write: &mut OwnedWriteHalf,
) -> Result<(), ErrorBody> {
    let stored = shared.runtime.shared_store().checkpoints(session).await;
    let checkpoints =
        stored.map_err(|e| ErrorBody::new(ErrorCode::Internal, format!("following: {e}")))?;
    for checkpoint in checkpoints.into_iter().filter(|c| c.run_id == *run) {
        let event = ryvos::Event {
            session_id: session.clone(),
            run_id: run.clone(),
            kind: ryvos::EventKind::CheckpointSaved {
                turn: checkpoint.turn,
            },
        };
        lines
            .push(&event)
            .map_err(|e| ErrorBody::new(ErrorCode::Internal, e.to_string()))?;
        lines.told(run.clone(), checkpoint.turn);
    }
    (lines.flush(write).await).map_err(|_| ErrorBody::new(ErrorCode::Internal, "the client left"))
}

/// The run a `follow` or `wait` is about.
struct Found {
    session: SessionId,
    run: RunId,
    /// In flight on this daemon.
    here: bool,
}

/// The session and run `given` names: a run in flight here, a session's run in flight here,
/// or a session's latest run (or the session whose latest run is `given`).
async fn find(given: &str, shared: &Shared) -> Result<Found, ErrorBody> {
    let in_flight = shared.runtime.runs_in_flight_listed();
    let here = in_flight
        .iter()
        .find(|r| r.run_id.as_str() == given || r.session_id.as_str() == given);
    if let Some(run) = here {
        return Ok(Found {
            session: run.session_id.clone(),
            run: run.run_id.clone(),
            here: true,
        });
    }
    let internal = |e: ryvos::RuntimeError| ErrorBody::new(ErrorCode::Internal, e.to_string());
    // A session is read by its id; a run only its session's record names: every one is read.
    let latest = match given.starts_with("r_") {
        false => (shared.runtime.session(&SessionId::new(given)).await)
            .map_err(internal)?
            .and_then(|s| Some((s.session_id, s.last_run?))),
        true => (shared.runtime.sessions().await.map_err(internal)?)
            .into_iter()
            .find(|s| s.last_run.as_ref().is_some_and(|r| r.as_str() == given))
            .and_then(|s| Some((s.session_id, s.last_run?))),
    };
    let latest = latest.map(|(session, run)| Found {
        session,
        run,
        here: false,
    });
    latest.ok_or_else(|| {
        let what = match given.starts_with("r_") {
            true => format!("run {given} is not in flight here, nor any session's latest run"),
            false => format!("session {given} has no run"),
        };
        ErrorBody::new(
            ErrorCode::NotFound,
            format!(
                "{what}; `ryvos status` lists the runs in flight, `ryvos sessions` the sessions"
            ),
        )
    })
}
