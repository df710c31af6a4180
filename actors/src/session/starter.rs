//! Starting runs: the one way in to the session supervisor, held by the engine and by its
//! clients (the Director starts each step's run through it, as a host application would).

use super::{RunSpec, RunTicket, SessionSupervisorMsg, StartRunError};
use crate::event::RunStatus;
use crate::ids::SessionId;
use crate::supervision::ChildSlot;
use std::time::Duration;

/// How long a start may wait for the session supervisor's answer.
const START_RUN_TIMEOUT: Duration = Duration::from_secs(30);

/// Starts runs through the session supervisor, riding out its restarts.
#[derive(Clone)]
pub(crate) struct RunStarter {
    sessions: ChildSlot<SessionSupervisorMsg>,
}

impl RunStarter {
    /// A starter through the supervisor in `sessions`.
    pub(crate) fn new(sessions: ChildSlot<SessionSupervisorMsg>) -> Self {
        Self { sessions }
    }

    /// Starts a run on `session` (a new session when `None`). The ticket's event receiver was
    /// subscribed before the run began, so it sees every event of the run.
    pub(crate) async fn start(
        &self,
        session: Option<SessionId>,
        spec: RunSpec,
    ) -> Result<RunTicket, StartRunError> {
        let supervisor = self
            .sessions
            .get()
            .map_err(|e| StartRunError::Unanswered(e.to_string()))?;
        ractor::call_t!(
            supervisor,
            |reply| SessionSupervisorMsg::StartRun {
                session_id: session,
                spec: Box::new(spec),
                reply,
            },
            START_RUN_TIMEOUT.as_millis() as u64
        )
        .map_err(|e| StartRunError::Unanswered(e.to_string()))?
    }

    /// Stops the run in flight on `session`: for good (`Cancelled`), or paused after its
    /// current step (`Interrupted`). Whether one was in flight.
    pub(crate) async fn stop(
        &self,
        session: &SessionId,
        status: RunStatus,
        reason: &str,
    ) -> Result<bool, StartRunError> {
        let supervisor = self
            .sessions
            .get()
            .map_err(|e| StartRunError::Unanswered(e.to_string()))?;
        let session_id = session.clone();
        let reason = reason.to_owned();
        let asked = if status == RunStatus::Interrupted {
            ractor::call_t!(
                supervisor,
                |reply| SessionSupervisorMsg::InterruptRun {
                    session_id,
                    reason,
                    reply,
                },
                START_RUN_TIMEOUT.as_millis() as u64
            )
        } else {
            ractor::call_t!(
                supervisor,
                |reply| SessionSupervisorMsg::StopRun {
                    session_id,
                    status,
                    reason,
                    reply,
                },
                START_RUN_TIMEOUT.as_millis() as u64
            )
        };
        asked.map_err(|e| StartRunError::Unanswered(e.to_string()))
    }
}
