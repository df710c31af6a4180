//! Where a rewind or a fork goes: a turn as `ryvos history` numbers them (the session's turns
//! in order, from 1), the start of a run, or back before the last rewind.

use super::RewindError;
use crate::ids::{RunId, SessionId};
use crate::store::{SessionHistory, SessionRecord, Store};
use ryvos_protocol::records::{RewindPoint, WorkspaceMark};

/// A point to go back to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RewindTo {
    /// Right after the session's turn N (from 1, as `ryvos history` numbers them).
    Turn(u32),
    /// Just before run RUN started.
    BeforeRun(RunId),
    /// Back to where the last rewind was made from (a rewind cut off by a crash too).
    Undo,
}

/// A point found, with what it is called.
pub(super) struct Found {
    pub label: String,
    pub point: RewindPoint,
}

impl Found {
    /// The snapshot of the files at the point; refused where none was taken.
    pub(super) fn mark(&self) -> Result<WorkspaceMark, RewindError> {
        self.point.workspace.clone().ok_or_else(|| {
            RewindError::Refused(format!(
                "no snapshot of the files was taken at {} ([rewind] enabled = false then)",
                self.label
            ))
        })
    }
}

/// Session `id` as stored, and its record; an unknown session is `NotFound`.
pub(super) async fn load(
    store: &Store,
    id: &SessionId,
) -> Result<(SessionHistory, SessionRecord), RewindError> {
    let stored = store.load_session(id).await?;
    let record = stored
        .record
        .clone()
        .ok_or_else(|| RewindError::NotFound(id.clone()))?;
    Ok((stored, record))
}

/// The point `to` names in session `id`, loaded as `stored`.
pub(super) async fn find(
    store: &Store,
    id: &SessionId,
    stored: &SessionHistory,
    to: &RewindTo,
) -> Result<Found, RewindError> {
    let record = stored
        .record
        .as_ref()
        .ok_or_else(|| RewindError::NotFound(id.clone()))?;
    let unrecorded = |what: String| {
        RewindError::Refused(format!(
            "{what} was stored by a Ryvos that did not record rewind points"
        ))
    };
    match to {
        RewindTo::Turn(n) => {
            let checkpoints = store.checkpoints(id).await?;
            let turn = (*n as usize)
                .checked_sub(1)
                .and_then(|i| checkpoints.get(i))
                .ok_or(RewindError::NoSuchTurn {
                    turn: *n,
                    turns: checkpoints.len(),
                })?;
            let point = turn
                .point
                .clone()
                .ok_or_else(|| unrecorded(format!("turn {n}")))?;
            Ok(Found {
                label: format!("turn {n}"),
                point,
            })
        }
        RewindTo::BeforeRun(run) => {
            let runs = store.session_runs(id).await?;
            let found = runs
                .iter()
                .find(|r| r.run_id == *run)
                .ok_or_else(|| RewindError::NoSuchRun(run.clone(), id.clone()))?;
            let point = found
                .start
                .clone()
                .ok_or_else(|| unrecorded(format!("run {run}")))?;
            Ok(Found {
                label: format!("before run {run}"),
                point,
            })
        }
        RewindTo::Undo => match (&record.rewinding, &record.last_rewind) {
            // An undo cut off is finished; another rewind cut off is undone.
            (Some(cut), _) if cut.undoing => Ok(Found {
                label: cut.label.clone(),
                point: cut.to.clone(),
            }),
            (Some(cut), _) => Ok(Found {
                label: format!("before the rewind to {}", cut.label),
                point: cut.from.clone(),
            }),
            (None, Some(last)) => Ok(Found {
                label: format!("before the rewind to {}", last.label),
                point: last.undo.clone(),
            }),
            (None, None) => Err(RewindError::NothingToUndo(id.clone())),
        },
    }
}
