//! Bringing a session back: its history from the store, and an end for every run that a
//! crash or a failed actor cut off.

use crate::event::{EventKind, RunEvents, RunStatus, SessionEvents};
use crate::ids::{RunId, SessionId};
use crate::store::{now_ms, RunRecord, SessionHistory, Store, TurnCheckpoint};

/// Why a run found unfinished in the store is ended, when no actor failure explains it.
pub(super) const CUT_OFF: &str = "interrupted: the runtime stopped before this run ended (a \
                                  crash or a kill); its stored turns are kept, and resuming the \
                                  session goes on";

/// What a reload read from the store.
pub(super) struct Reloaded {
    pub history: SessionHistory,
    /// The checkpoints of the run being recovered, if one is.
    pub recovered_turns: Vec<TurnCheckpoint>,
}

/// Reads the session (and the turns of `recovering`).
pub(super) async fn load(
    store: &Store,
    id: &SessionId,
    recovering: Option<&RunId>,
) -> Result<Reloaded, String> {
    let read = async {
        let history = store.load_session_window(id).await?;
        let recovered_turns = match recovering {
            Some(run) => store
                .checkpoints(id)
                .await?
                .into_iter()
                .filter(|c| c.run_id == *run)
                .collect(),
            None => Vec::new(),
        };
        Ok::<_, crate::store::StoreError>(Reloaded {
            history,
            recovered_turns,
        })
    };
    read.await.map_err(|e| e.to_string())
}

/// Marks every unfinished run failed, with the actor failure's reason for the run being
/// recovered and "interrupted" for the others. Returns the records to store.
pub(super) fn end_unfinished(
    unfinished: Vec<RunRecord>,
    recovering: Option<&(RunId, String)>,
) -> Vec<RunRecord> {
    unfinished
        .into_iter()
        .map(|mut run| {
            let reason = match recovering {
                Some((id, why)) if *id == run.run_id => why.clone(),
                _ => CUT_OFF.to_owned(),
            };
            run.status = Some(RunStatus::Failed);
            run.reason = Some(reason);
            run.ended_at_ms = Some(now_ms());
            run
        })
        .collect()
}

/// Ends a run that failed with its actor (or could not be brought back): an `Error`, then its
/// `RunComplete` with what the store has of its turns (none, when nothing reached it).
pub(super) fn report_failed_run(
    events: &RunEvents,
    reason: &str,
    turns: &[TurnCheckpoint],
    cost_cents: Option<f64>,
    started_at_ms: u64,
) {
    events.emit(EventKind::Error {
        message: reason.to_owned(),
    });
    let (turn, input_tokens, output_tokens) = totals(turns);
    events.emit(EventKind::RunComplete {
        status: RunStatus::Failed,
        output: String::new(),
        turns: turn,
        input_tokens,
        output_tokens,
        cost_cents,
        duration_ms: now_ms().saturating_sub(started_at_ms),
        reason: Some(reason.to_owned()),
        truncated: false,
        park_reason: None,
    });
}

/// What a run's stored `turns` add up to: its last turn, and its input and output tokens.
pub(super) fn totals<'a>(turns: impl IntoIterator<Item = &'a TurnCheckpoint>) -> (u32, u64, u64) {
    (turns.into_iter()).fold((0, 0, 0), |(turn, input, output), c| {
        (
            turn.max(c.turn),
            input + c.input_tokens,
            output + c.output_tokens,
        )
    })
}

/// Why a run ended with its session's failure.
pub(super) fn lost_run_reason(why: &str) -> String {
    format!("the session failed ({why}); the run was stopped at its last checkpoint")
}

/// Ends a run whose session could not be brought back: the caller is told, never left waiting.
pub(super) fn report_lost_run(
    events: &SessionEvents,
    session_id: &SessionId,
    run_id: RunId,
    reason: String,
) {
    let run = events.for_run(session_id.clone(), run_id);
    report_failed_run(&run, &reason, &[], None, now_ms());
}
