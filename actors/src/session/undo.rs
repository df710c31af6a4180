//! Undoing a session's last compaction: its window goes back to where it started before, with
//! the summary it had then. The messages never left the store, so the next run sees them
//! again (useful after switching to a model with a larger window). A window always starts where
//! a compaction could start one, so the restored one pairs every call with its result.

use crate::config::AgentConfig;
use crate::ids::SessionId;
use crate::store::{now_ms, Compaction, Store, StoreError, Write, WriteBatch};

/// The window an undo restored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Undone {
    /// The window starts at this message again.
    pub first_kept_seq: u64,
    /// How many messages came back into the window.
    pub restored_messages: u64,
    /// The restored window's size in tokens: counted where the store has the count, bounded
    /// by bytes elsewhere.
    pub context_tokens: u64,
    /// `[agent] max_context_tokens`.
    pub max_context_tokens: u64,
    /// The window is under the point where the next run compacts it again (the Guardian's
    /// hard limit).
    pub fits: bool,
}

/// Why a compaction could not be undone.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    #[error("there is no session {0}; `ryvos sessions` lists them")]
    NotFound(SessionId),
    #[error("session {0} has a run in flight; undo its compaction once the run has ended")]
    Busy(SessionId),
    #[error("session {0} was never compacted: there is nothing to undo")]
    NeverCompacted(SessionId),
    #[error(
        "the last compaction of session {0} was already undone; only the last one can be, and \
         the window before it was not recorded"
    )]
    AlreadyUndone(SessionId),
    #[error(
        "the compaction of session {0} was made by a Ryvos that did not record the window \
         before it, so it cannot be undone"
    )]
    NotRecorded(SessionId),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Sets session `id`'s window back to before its last compaction, durably. The session must
/// have no run in flight, and no copy of it in memory (the caller drops it).
pub(crate) async fn undo_last_compaction(
    store: &Store,
    id: &SessionId,
    agent: &AgentConfig,
) -> Result<Undone, UndoError> {
    let stored = store.load_session(id).await?;
    if stored.record.is_none() {
        return Err(UndoError::NotFound(id.clone()));
    }
    let last = stored
        .compaction
        .ok_or_else(|| UndoError::NeverCompacted(id.clone()))?;
    let Some(before) = last.previous else {
        return Err(match last.undone_at_ms {
            Some(_) => UndoError::AlreadyUndone(id.clone()),
            None => UndoError::NotRecorded(id.clone()),
        });
    };
    let restored = Compaction {
        first_kept_seq: before.first_kept_seq,
        first_seq: before.first_kept_seq,
        summary: before.summary,
        undone_at_ms: Some(now_ms()),
        earlier: last.earlier,
        ..Compaction::default()
    };
    let window = stored
        .messages
        .iter()
        .filter(|m| m.seq >= restored.first_kept_seq);
    // Counted as the next run counts them (not bounded by their bytes): what is said is
    // what the next compaction will measure.
    let context_tokens = window
        .clone()
        .map(|m| match m.tokens {
            0 => u64::from(crate::tokens::count_message(&m.message)),
            counted => u64::from(counted),
        })
        .sum::<u64>()
        + (restored.summary.as_deref()).map_or(0, |s| u64::from(crate::tokens::count_text(s)));
    let restored_messages = window.filter(|m| m.seq < last.first_kept_seq).count() as u64;
    let first_kept_seq = restored.first_kept_seq;
    store
        .write(&[WriteBatch::of(id.clone(), [Write::Compaction(restored)])])
        .await?;
    let max = agent.max_context_tokens;
    let hard = max.saturating_mul(u64::from(agent.guardian.token_budget_hard)) / 100;
    Ok(Undone {
        first_kept_seq,
        restored_messages,
        context_tokens,
        max_context_tokens: max,
        fits: context_tokens < hard,
    })
}
