//! The session supervisor's one typed handle, held by the engine and by its clients (the
//! Director starts each step's run through it, as a host application would): every question
//! to the supervisor is built here, and bounded by one patience.

use super::{RunSpec, RunTicket, SessionSupervisorMsg, StartRunError, UndoError, Undone};
use crate::event::RunStatus;
use crate::ids::SessionId;
use crate::llm_stream::ModelChain;
use crate::supervision::ChildSlot;
use ractor::RpcReplyPort;
use std::sync::Arc;
use std::time::Duration;

/// How long a question may wait for the session supervisor's answer.
const PATIENCE: Duration = Duration::from_secs(30);

/// The session supervisor, riding out its restarts.
#[derive(Clone)]
pub(crate) struct Sessions {
    supervisor: ChildSlot<SessionSupervisorMsg>,
}

impl Sessions {
    /// The supervisor in `supervisor`.
    pub(crate) fn new(supervisor: ChildSlot<SessionSupervisorMsg>) -> Self {
        Self { supervisor }
    }

    /// Starts a run on `session` (a new session when `None`), asking `models` (the chain its
    /// settings chose, resolved once by the caller). The ticket's event receiver was
    /// subscribed before the run began, so it sees every event of the run.
    pub(crate) async fn start(
        &self,
        session: Option<SessionId>,
        spec: RunSpec,
        models: Arc<ModelChain>,
    ) -> Result<RunTicket, StartRunError> {
        self.ask(|reply| SessionSupervisorMsg::StartRun {
            session_id: session,
            spec: Box::new(spec),
            models,
            reply,
        })
        .await?
    }

    /// Stops the run in flight on `session`: for good (`Cancelled`), or paused after its
    /// current step (`Interrupted`). Whether one was in flight.
    pub(crate) async fn stop(
        &self,
        session: &SessionId,
        status: RunStatus,
        reason: &str,
    ) -> Result<bool, StartRunError> {
        let (session_id, reason) = (session.clone(), reason.to_owned());
        match status {
            RunStatus::Interrupted => {
                self.ask(|reply| SessionSupervisorMsg::InterruptRun {
                    session_id,
                    reason,
                    reply,
                })
                .await
            }
            status => {
                self.ask(|reply| SessionSupervisorMsg::StopRun {
                    session_id,
                    status,
                    reason,
                    reply,
                })
                .await
            }
        }
    }

    /// Sets `session`'s window back to before its last compaction (see
    /// [`crate::Engine::undo_compaction`]).
    pub(crate) async fn undo_compaction(
        &self,
        session: &SessionId,
    ) -> Result<Result<Undone, UndoError>, StartRunError> {
        self.ask(|reply| SessionSupervisorMsg::UndoCompaction {
            session_id: session.clone(),
            reply,
        })
        .await
    }

    /// Ends every run in flight (status `interrupted`) and waits, at most `patience`, until
    /// their last turns are handed to the store: the shutdown's first step.
    pub(crate) async fn stop_all(&self, reason: &str, patience: Duration) -> Result<(), String> {
        // A supervisor already gone has no run left to stop.
        if self.supervisor.get().is_err() {
            return Ok(());
        }
        let reason = reason.to_owned();
        let asked = |reply| SessionSupervisorMsg::StopAll { reason, reply };
        self.ask_within(patience, asked)
            .await
            .map_err(|e| e.to_string())
    }

    /// Test hook: makes a session's actor panic (or, with `driver`, its run's driver);
    /// whether the session was live.
    #[cfg(feature = "testing")]
    pub(crate) async fn inject_panic(&self, session_id: SessionId, driver: bool) -> bool {
        self.ask(|reply| SessionSupervisorMsg::PanicSession {
            session_id,
            driver,
            reply,
        })
        .await
        .unwrap_or(false)
    }

    /// Asks the supervisor and waits, at most [`PATIENCE`], for its answer.
    async fn ask<R: Send + 'static>(
        &self,
        request: impl FnOnce(RpcReplyPort<R>) -> SessionSupervisorMsg,
    ) -> Result<R, StartRunError> {
        self.ask_within(PATIENCE, request).await
    }

    /// Asks the supervisor and waits, at most `patience`, for its answer.
    async fn ask_within<R: Send + 'static>(
        &self,
        patience: Duration,
        request: impl FnOnce(RpcReplyPort<R>) -> SessionSupervisorMsg,
    ) -> Result<R, StartRunError> {
        let supervisor =
            (self.supervisor.get()).map_err(|e| StartRunError::Unanswered(e.to_string()))?;
        ractor::call_t!(supervisor, request, patience.as_millis() as u64)
            .map_err(|e| StartRunError::Unanswered(e.to_string()))
    }
}
