//! What a session actor tells its supervisor: all it may send upwards, so a session knows
//! nothing else of the supervisor that owns it.

use crate::ids::{RunId, SessionId};

/// A session's notice to its supervisor.
#[derive(Debug)]
pub(crate) enum SessionNotice {
    /// The session's run has ended and been reported.
    RunFinished {
        session_id: SessionId,
        run_id: RunId,
    },
    /// The session has been idle long enough; stop its actor if no run came in since.
    Hibernate { session_id: SessionId },
    /// The driver of the session's run failed (`why`): the conversation was lost with it, so
    /// the session is to be reloaded and its run reported failed.
    DriverFailed { session_id: SessionId, why: String },
}

/// Where a session sends its notices.
pub(super) type NoticeRef = ractor::DerivedActorRef<SessionNotice>;
