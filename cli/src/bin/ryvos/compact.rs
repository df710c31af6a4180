//! `ryvos compact undo SESSION`: a session's window set back to before its last compaction,
//! through the daemon when one answers, else on this home's store directly.

use crate::out::outln;
use crate::reading::{shown, through_daemon_or_here};
use ryvos::config::Config;
use ryvos::protocol::{CompactUndo, CompactUndoResult, SessionParams};
use ryvos::SessionId;

/// Undoes `session`'s last compaction and says what came back (as JSON with `json`); the exit
/// code: 1 when there is nothing to undo or a run is in flight.
pub async fn undo(session: String, socket: &std::path::Path, config: &Config, json: bool) -> u8 {
    let params = SessionParams { session };
    through_daemon_or_here::<CompactUndo>(
        socket,
        config,
        params,
        shown(json, said),
        async |runtime, params| {
            runtime
                .undo_compaction(&SessionId::new(params.session))
                .await
        },
    )
    .await
}
/// What the undo restored, and whether it fits the budget.
fn said(undone: &CompactUndoResult) {
    outln!(
        "session {}: its window starts at message {} again; {} messages are back in it \
         (about {} tokens)",
        undone.session_id,
        undone.first_kept_seq,
        undone.restored_messages,
        undone.context_tokens
    );
    if !undone.fits {
        outln!(
            "that is over what [agent] max_context_tokens ({}) allows: the next run compacts \
             it again. Raise max_context_tokens (a model with a larger window) for it to stay.",
            undone.max_context_tokens
        );
    }
}
