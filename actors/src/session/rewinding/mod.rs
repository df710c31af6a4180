//! Rewinding a session: its conversation's window and its workspace's files back to a point
//! (a turn's end, a run's start), together; and forking one into a new session with a copy of
//! the files as they were then.
//!
//! A rewind is durable in three steps: the intent (where to, and where from) is stored before
//! any file changes; the files are brought back; the new window is stored and the intent
//! cleared in one commit. A crash between leaves the intent, which refuses runs until the
//! same rewind is run again (it goes on from the intent, and ends where it would have) or
//! undone.

mod fork;
mod reach;
mod target;
mod window;

pub(crate) use fork::fork;
pub use fork::Forked;
pub use target::RewindTo;

use super::Services;
use crate::event::RunStatus;
use crate::ids::{RunId, SessionId};
use crate::rewind::Restored;
use crate::store::{now_ms, SessionHistory, SessionRecord, StoreError, Write, WriteBatch};
use ryvos_protocol::records::{LastRewind, RewindIntent, RewindPoint, WorkspaceMark};

/// A rewind done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rewound {
    /// Where the session went: `turn 7`, `before run r_…`.
    pub label: String,
    /// How many messages the model's window holds now.
    pub window_messages: u64,
    /// The workspace brought back, and what changed in it.
    pub workspace: String,
    pub files_written: usize,
    pub files_removed: usize,
    /// The calls after the point whose effects stay: the rewind does not undo them.
    pub not_undone: Vec<String>,
}

/// Why a session could not be rewound or forked.
#[derive(Debug, thiserror::Error)]
pub enum RewindError {
    #[error("there is no session {0}; `ryvos sessions` lists them")]
    NotFound(SessionId),
    #[error("session {0} has a run in flight; rewind it once the run has ended")]
    Busy(SessionId),
    #[error(
        "session {session} has a parked run, {run}: `ryvos stop {run}` ends it, then the \
         session can be rewound"
    )]
    Parked { session: SessionId, run: RunId },
    #[error("there is no turn {turn}: the session has {turns} (`ryvos history` numbers them)")]
    NoSuchTurn { turn: u32, turns: usize },
    #[error("session {1} has no run {0}")]
    NoSuchRun(RunId, SessionId),
    #[error("session {0} was never rewound: there is nothing to undo")]
    NothingToUndo(SessionId),
    #[error("{}", cut_off(session, label, *undoing))]
    CutOff {
        session: SessionId,
        label: String,
        undoing: bool,
    },
    #[error("cannot go back there: {0}")]
    Refused(String),
    #[error("the files could not be brought back: {0}")]
    Files(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a session whose rewind (or undo, `undoing`) to `label` was cut off is told.
fn cut_off(session: &SessionId, label: &str, undoing: bool) -> String {
    match undoing {
        true => format!(
            "an undo of session {session}'s rewind (going back to {label}) was cut off: \
             `ryvos rewind {session} --undo` again finishes it"
        ),
        false => format!(
            "a rewind of session {session} to {label} was cut off: run that rewind again to \
             finish it, or `ryvos rewind {session} --undo` to go back to before it"
        ),
    }
}

/// Rewinds session `id` to `to`. The session must have no run in flight and no copy in
/// memory (the caller drops it).
pub(crate) async fn rewind(
    services: &Services,
    id: &SessionId,
    to: &RewindTo,
) -> Result<Rewound, RewindError> {
    let plan = plan(services, id, to).await?;
    let store = &services.store;
    let intent = RewindIntent {
        label: plan.found.label.clone(),
        to: plan.found.point.clone(),
        from: plan.from.clone(),
        undoing: *to == RewindTo::Undo,
    };
    store
        .write(&[session_write(&plan.record, |r| r.rewinding = Some(intent))])
        .await?;
    let snapshots = services.snapshots.clone();
    let mark = plan.mark.clone();
    let restored: Restored = blocking(move || snapshots.restore(&mark))
        .await
        .map(|(_, restored)| restored)
        .map_err(RewindError::Files)?;
    let (batch, window_messages) = plan.new_window();
    store.write(&[batch]).await?;
    let beyond = services.sandbox.reach_beyond_workspace();
    let not_undone = match to {
        RewindTo::Undo => Vec::new(),
        _ => reach::not_undone(
            &plan.stored,
            &plan.found.point,
            &services.registry,
            beyond.as_deref(),
        ),
    };
    Ok(Rewound {
        label: plan.found.label,
        window_messages,
        workspace: plan.mark.workspace,
        files_written: restored.written,
        files_removed: restored.removed,
        not_undone,
    })
}

/// A rewind, checked and ready: nothing has changed yet.
struct Plan {
    stored: SessionHistory,
    record: SessionRecord,
    found: target::Found,
    /// The files to bring back.
    mark: WorkspaceMark,
    /// The summary the window had then.
    summary: Option<String>,
    /// Where undoing the rewind goes back to.
    from: RewindPoint,
}

/// Finds where `to` goes in session `id` and checks it can be gone back to: the session
/// between runs, a rewind cut off gone on with (the same one) or undone, the point's files
/// and summary all kept.
async fn plan(services: &Services, id: &SessionId, to: &RewindTo) -> Result<Plan, RewindError> {
    let store = &services.store;
    let (stored, record) = target::load(store, id).await?;
    let parked = record.last_status == Some(RunStatus::Parked);
    if let Some(run) = record.last_run.clone().filter(|_| parked) {
        return Err(RewindError::Parked {
            session: id.clone(),
            run,
        });
    }
    let found = target::find(store, id, &stored, to).await?;
    let undo = *to == RewindTo::Undo;
    let resumed = match &record.rewinding {
        Some(cut) if undo || (cut.label == found.label && !cut.undoing) => Some(cut.clone()),
        Some(cut) => {
            return Err(RewindError::CutOff {
                session: id.clone(),
                label: cut.label.clone(),
                undoing: cut.undoing,
            })
        }
        None => None,
    };
    let mark = found.mark()?;
    let summary = summary_of(services, &found.point)?;
    let (snapshots, check) = (services.snapshots.clone(), mark.clone());
    if let Some(why) = blocking(move || snapshots.refusal(&check)).await {
        return Err(RewindError::Refused(format!("{}: {why}", found.label)));
    }
    let from = match resumed {
        // Undoing a rewind cut off goes back to before it (and undoing that finishes it).
        Some(cut) if undo && !cut.undoing => cut.to,
        // Going on: where it was made from stays what undoing it restores.
        Some(cut) => cut.from,
        None => here(services, &stored, &mark).await?,
    };
    Ok(Plan {
        stored,
        record,
        found,
        mark,
        summary,
        from,
    })
}

impl Plan {
    /// The window of the point after the session's messages, the intent cleared and the
    /// undo kept, in one batch; how many messages the window holds.
    fn new_window(&self) -> (WriteBatch, u64) {
        let at_ms = now_ms();
        let found = &self.found;
        let new = window::at(
            &self.stored,
            &found.point,
            self.summary.clone(),
            &found.label,
            at_ms,
        );
        let count = new.messages.len() as u64;
        let next = new
            .messages
            .last()
            .map_or(self.stored.next_seq, |m| m.seq + 1);
        let mut writes: Vec<Write> = new.messages.into_iter().map(Write::Message).collect();
        writes.push(Write::Compaction(new.compaction));
        let undo = LastRewind {
            label: found.label.clone(),
            undo: self.from.clone(),
            at_ms,
        };
        let session = session_write(&self.record, |r| {
            r.rewinding = None;
            r.last_rewind = Some(undo);
            r.message_count = next;
            r.paused_calls.clear();
            r.measured = None;
        });
        writes.extend(session.writes);
        (
            WriteBatch::of(self.record.session_id.clone(), writes),
            count,
        )
    }
}

/// The session as it is now, with a snapshot of the workspace `mark` names: where undoing
/// the rewind goes back to.
async fn here(
    services: &Services,
    stored: &SessionHistory,
    mark: &WorkspaceMark,
) -> Result<RewindPoint, RewindError> {
    let compaction = stored.compaction.as_ref();
    let summary = match compaction.and_then(|c| c.summary.as_deref()) {
        Some(text) => Some(services.snapshots.put_text(text).map_err(|e| {
            RewindError::Files(format!("the summary could not be kept for an undo: {e}"))
        })?),
        None => None,
    };
    let now = services
        .snapshots
        .take_async(mark.workspace.clone().into())
        .await;
    if let Some(why) = &now.unkept {
        return Err(RewindError::Refused(format!(
            "the files as they are now could not be kept, so the rewind could not be undone: \
             {why}"
        )));
    }
    Ok(RewindPoint {
        window_from: compaction.map_or(0, |c| c.first_kept_seq),
        upto: stored.next_seq,
        summary,
        workspace: Some(now),
    })
}

/// The summary `point` had, read back.
fn summary_of(services: &Services, point: &RewindPoint) -> Result<Option<String>, RewindError> {
    let Some(id) = &point.summary else {
        return Ok(None);
    };
    services
        .snapshots
        .text(id)
        .map(Some)
        .map_err(|e| RewindError::Refused(format!("the summary the window had then is lost: {e}")))
}

/// `record`, changed by `change`, to store.
fn session_write(record: &SessionRecord, change: impl FnOnce(&mut SessionRecord)) -> WriteBatch {
    let mut record = record.clone();
    change(&mut record);
    record.updated_at_ms = now_ms();
    WriteBatch::of(record.session_id.clone(), [Write::Session(record)])
}

/// `work` on a blocking thread (snapshots read and write files).
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}
