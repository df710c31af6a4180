//! What the session supervisor is asked, and what it answers: its messages, a run's ticket,
//! why a run was not started.

use super::{RunSpec, Services, SessionNotice};
use crate::event::{Event, RunStatus};
use crate::ids::{RunId, SessionId};
use ractor::RpcReplyPort;
use std::sync::Arc;
use tokio::sync::broadcast;

/// A run accepted by the runtime: its ids, and its events from the very first.
pub struct RunTicket {
    pub session_id: SessionId,
    pub run_id: RunId,
    pub events: broadcast::Receiver<Arc<Event>>,
}

/// Why a run was not started.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StartRunError {
    #[error("busy: {limit} runs are already in flight (max_in_flight_runs); try again when one finishes")]
    Busy { limit: usize },
    #[error("session {0} already has a run in flight; wait for it to finish or cancel it")]
    SessionBusy(SessionId),
    #[error("session {0} is recovering from a failure; try again in a moment")]
    Recovering(SessionId),
    #[error("the runtime is shutting down and accepts no new runs")]
    ShuttingDown,
    #[error("the session could not be started: {0}")]
    Spawn(String),
    /// The run's settings cannot be honoured (a model this runtime cannot ask).
    #[error("{0}")]
    Settings(String),
    #[error("the session supervisor did not answer: {0}")]
    Unanswered(String),
}

impl From<SessionNotice> for SessionSupervisorMsg {
    fn from(notice: SessionNotice) -> Self {
        Self::Notice(notice)
    }
}

impl TryFrom<SessionSupervisorMsg> for SessionNotice {
    type Error = SessionSupervisorMsg;

    fn try_from(msg: SessionSupervisorMsg) -> Result<Self, Self::Error> {
        match msg {
            SessionSupervisorMsg::Notice(notice) => Ok(notice),
            other => Err(other),
        }
    }
}

/// Work done on a session while it is idle, with the engine's services.
pub(crate) type IdleWork =
    Box<dyn FnOnce(Services) -> futures_util::future::BoxFuture<'static, ()> + Send>;

/// Messages of the [`SessionSupervisor`].
pub(crate) enum SessionSupervisorMsg {
    /// Start a run, on `session_id` or on a new session.
    StartRun {
        session_id: Option<SessionId>,
        spec: Box<RunSpec>,
        /// The models it asks, as its settings chose them.
        models: Arc<crate::llm_stream::ModelChain>,
        reply: RpcReplyPort<Result<RunTicket, StartRunError>>,
    },
    /// What a session actor reports.
    Notice(SessionNotice),
    /// Restart a failed session's actor.
    Restart { session_id: SessionId },
    /// Pause every run in flight at once (status `interrupted`, resumable); answers once all
    /// have ended.
    StopAll {
        reason: String,
        reply: RpcReplyPort<()>,
    },
    /// The shutdown's wait is over, whether or not every run has ended.
    StopAllTimeout,
    /// End the run in flight on `session_id` with `status`; answers whether one was.
    StopRun {
        session_id: SessionId,
        status: RunStatus,
        reason: String,
        reply: RpcReplyPort<bool>,
    },
    /// Pause the run in flight on `session_id` after its current step (status
    /// `interrupted`); answers whether one was in flight.
    InterruptRun {
        session_id: SessionId,
        reason: String,
        reply: RpcReplyPort<bool>,
    },
    /// Do `work` on `session_id` while no run is in flight on it (none starts until it is
    /// done), its copy in memory dropped (`why`); answers whether it was idle, so the work
    /// begun.
    WhileIdle {
        session_id: SessionId,
        work: IdleWork,
        why: &'static str,
        reply: RpcReplyPort<bool>,
    },
    /// The work done on `session_id` while it was idle has ended: runs may start on it.
    Released { session_id: SessionId },
    /// The engine's services.
    Services { reply: RpcReplyPort<Services> },
    /// Test hook: make a session's actor panic, or (`driver`) its run's driver. Answers
    /// whether the session was found.
    #[cfg(feature = "testing")]
    PanicSession {
        session_id: SessionId,
        driver: bool,
        reply: RpcReplyPort<bool>,
    },
}
