//! What the engine does to a session between its runs: undo its last compaction, rewind it to
//! a point, fork it. Each is refused while a run (or a Director) is in flight on the session.

use super::{Engine, EngineError};
use crate::ids::SessionId;
use crate::session::{Forked, RewindError, RewindTo, Rewound, UndoError, Undone};
use std::path::PathBuf;

impl Engine {
    /// Whether a Director is running on `session`.
    fn directed(&self, session: &SessionId) -> bool {
        let directing = self.directing.lock().unwrap_or_else(|e| e.into_inner());
        directing.contains_key(session)
    }

    /// Sets `session`'s context window back to before its last compaction: the messages it
    /// took out are sent to the model again from the next run on. Refused when there is
    /// nothing to undo.
    pub async fn undo_compaction(&self, session: &SessionId) -> Result<Undone, EngineError> {
        let busy = || UndoError::Busy(session.clone());
        if self.directed(session) {
            return Err(busy().into());
        }
        let id = session.clone();
        let undone = self
            .sessions()
            .while_idle(
                session,
                "its compaction was undone",
                move |services| async move {
                    let agent = services.agent.clone();
                    crate::session::undo_last_compaction(&services.store, &id, &agent).await
                },
            )
            .await?;
        Ok(undone.ok_or_else(busy)??)
    }

    /// Takes `session` back to `to`: its conversation's window and its workspace's files as
    /// they were then. Undoable (`RewindTo::Undo`), and durable: a rewind cut off by a crash
    /// is finished by asking for it again.
    pub async fn rewind(&self, session: &SessionId, to: RewindTo) -> Result<Rewound, EngineError> {
        let busy = || RewindError::Busy(session.clone());
        if self.directed(session) {
            return Err(busy().into());
        }
        let id = session.clone();
        let rewound = self
            .sessions()
            .while_idle(session, "it was rewound", move |services| async move {
                crate::session::rewind(&services, &id, &to).await
            })
            .await?;
        Ok(rewound.ok_or_else(busy)??)
    }

    /// A new session with `session`'s conversation at `at`, working in a copy of its files as
    /// they were then (in `into`, or beside the original workspace).
    pub async fn fork(
        &self,
        session: &SessionId,
        at: RewindTo,
        into: Option<PathBuf>,
    ) -> Result<Forked, EngineError> {
        let services = self.sessions().services().await?;
        Ok(crate::session::fork(&services, session, &at, into).await?)
    }
}
