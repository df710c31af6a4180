//! The session supervisor's one typed handle, held by the engine and by its clients (the
//! Director starts each step's run through it, as a host application would): every question
//! to the supervisor is built here, and bounded by one patience.

use super::supervisor::IdleWork;
use super::{RunSpec, RunTicket, Services, SessionSupervisorMsg, StartRunError};
use crate::event::RunStatus;
use crate::ids::SessionId;
use crate::llm_stream::ModelChain;
use crate::supervision::ChildSlot;
use ractor::RpcReplyPort;
use std::sync::Arc;
use std::time::Duration;

/// How long a question may wait for the session supervisor's answer.
const PATIENCE: Duration = Duration::from_secs(30);

/// How long work on an idle session may take (a rewind bringing back many files).
const IDLE_WORK_PATIENCE: Duration = Duration::from_secs(600);

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

    /// Does `work` with the engine's services on `session` while no run is in flight on it
    /// and none starts, the session's copy in memory dropped (`why`); `None` when a run is in
    /// flight (or other work is being done on it).
    pub(crate) async fn while_idle<T, F>(
        &self,
        session: &SessionId,
        why: &'static str,
        work: impl FnOnce(Services) -> F + Send + 'static,
    ) -> Result<Option<T>, StartRunError>
    where
        T: Send + 'static,
        F: std::future::Future<Output = T> + Send + 'static,
    {
        let (done, result) = tokio::sync::oneshot::channel();
        let work: IdleWork = Box::new(move |services| {
            Box::pin(async move {
                // The caller may have left: the work is done all the same, and said so.
                if done.send(work(services).await).is_err() {
                    tracing::warn!(
                        "work on a session ended after its caller left; its answer is not told"
                    );
                }
            })
        });
        let idle = self
            .ask_within(IDLE_WORK_PATIENCE, |reply| {
                SessionSupervisorMsg::WhileIdle {
                    session_id: session.clone(),
                    work,
                    why,
                    reply,
                }
            })
            .await?;
        match idle {
            true => result.await.map(Some).map_err(|_| {
                StartRunError::Unanswered("the work on the session ended without an answer".into())
            }),
            false => Ok(None),
        }
    }

    /// The engine's services, for work that needs no session to be idle (a fork).
    pub(crate) async fn services(&self) -> Result<Services, StartRunError> {
        self.ask(|reply| SessionSupervisorMsg::Services { reply })
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
