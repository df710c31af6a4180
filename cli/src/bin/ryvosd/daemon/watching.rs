//! `follow` and `wait` of a run (`r_…`) or a session (`s_…`), on any store: a second terminal
//! watching a run this daemon hosts, however it was started. `follow` streams the run's events
//! from now on (the turns it stored before, as `CheckpointSaved` events, first), then its
//! outcome; `wait` only the outcome. A run that parks is followed
//! through the park, as `run` is. A run that has ended is answered at once from its record.
//! (A queued run's id, `q_…`, is answered by the queue's methods.)

use super::reply::EventLines;
use super::Shared;
use ryvos::protocol::{ErrorBody, ErrorCode, QueuedRunParams};
use ryvos::RunOutcome;
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
    // Subscribed first, so that no event comes between the look at the run and the stream.
    let live = shared.runtime.subscribe();
    let (session, run) = find(&params.run, shared).await?;
    if let Some(ended) = super::streaming::stored_end(shared, &session, &run).await {
        return Ok(ended);
    }
    tracing::info!(%session, %run, "a client follows the run");
    let mut lines = EventLines::new(id);
    if stream {
        told_so_far(&mut lines, (&session, &run), shared, write).await?;
    }
    let lines = stream.then_some(&mut lines);
    super::streaming::through_parks((&session, &run), live, lines, write, shared).await
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

/// The session and run `given` names: a run in flight here, a session's run in flight here,
/// or a session's latest run (or the session whose latest run is `given`).
async fn find(given: &str, shared: &Shared) -> Result<(SessionId, RunId), ErrorBody> {
    let in_flight = shared.runtime.runs_in_flight_listed();
    let here = in_flight
        .iter()
        .find(|r| r.run_id.as_str() == given || r.session_id.as_str() == given);
    if let Some(run) = here {
        return Ok((run.session_id.clone(), run.run_id.clone()));
    }
    let sessions = (shared.runtime.sessions().await)
        .map_err(|e| ErrorBody::new(ErrorCode::Internal, e.to_string()))?;
    let latest = sessions.iter().find_map(|s| {
        let run = s.last_run.as_ref()?;
        (s.session_id.as_str() == given || run.as_str() == given)
            .then(|| (s.session_id.clone(), run.clone()))
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
