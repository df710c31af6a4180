//! `ryvos compact undo SESSION`: a session's window set back to before its last compaction,
//! through the daemon when one answers, else on this home's store directly.

use crate::exit::{EXIT_DAEMON, EXIT_RUN_FAILED};
use crate::out::outln;
use crate::reading::{call, on_the_store, shown, store_only};
use ryvos::config::Config;
use ryvos::protocol::{CompactUndo, CompactUndoResult, SessionParams};
use ryvos::{Runtime, SessionId};
use ryvos_client::{Client, ClientError};

/// Undoes `session`'s last compaction and says what came back (as JSON with `json`); the exit
/// code: 1 when there is nothing to undo or a run is in flight.
pub async fn undo(session: String, socket: &std::path::Path, config: &Config, json: bool) -> u8 {
    let print = shown(json, said);
    match Client::connect(socket).await {
        Ok(mut client) => {
            let params = SessionParams { session };
            call::<CompactUndo>(&mut client, &params, print).await
        }
        Err(ClientError::NoDaemon { .. }) => {
            let undo = async |runtime: &Runtime| match runtime
                .undo_compaction(&SessionId::new(session))
                .await
            {
                Ok(undone) => {
                    print(&undone);
                    0
                }
                Err(e) => {
                    eprintln!("ryvos: {e}");
                    EXIT_RUN_FAILED
                }
            };
            on_the_store(store_only(config), undo).await
        }
        Err(e) => {
            eprintln!("ryvos: {e}");
            EXIT_DAEMON
        }
    }
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
