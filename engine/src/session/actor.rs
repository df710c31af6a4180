//! SessionActor: one conversation, and the run driving it.
//!
//! The actor owns the session's control: it starts a run (handing the conversation to the
//! run's [`Driver`], a task of its own), relays a stop or an interrupt to it, takes the
//! conversation back when the run ends, and asks to hibernate when idle. It stays supervised:
//! a driver that fails takes the actor down with it, and the restarted actor reloads the
//! session from the store and reports the run failed; an actor that fails stops its driver.

use super::conversation::Conversation;
use super::driver::{Control, Driver, Ended};
use super::notice::{NoticeRef, SessionNotice};
use super::{RunSpec, Services};
use crate::event::{RunStatus, SessionEvents};
use crate::ids::{RunId, SessionId};
use futures_util::FutureExt;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::panic::AssertUnwindSafe;
use std::time::Duration;
use tokio::sync::mpsc;

/// Messages of the [`SessionActor`].
pub(super) enum SessionMsg {
    /// Start a run (the supervisor has checked that none is in flight).
    StartRun { run_id: RunId, spec: RunSpec },
    /// The run's driver is done: the conversation comes back, and the run's end is reported.
    RunEnded {
        session: Box<Conversation>,
        ended: Box<Ended>,
    },
    /// The run's driver failed; the conversation was lost with it.
    DriverFailed { why: String },
    /// End the run in flight with `status`.
    Stop { status: RunStatus, reason: String },
    /// Pause the run in flight (status `interrupted`) after its current step, or at once
    /// (`now`: the daemon is stopping).
    Interrupt { reason: String, now: bool },
    /// Ask the supervisor to stop this actor if it is still idle since `epoch`.
    Hibernate { epoch: u64 },
    /// Test hook: panic inside the handler.
    #[cfg(feature = "testing")]
    Panic,
}

/// What a session actor is started (or restarted) with.
pub(super) struct SessionArgs {
    pub id: SessionId,
    pub services: Services,
    pub events: SessionEvents,
    pub supervisor: NoticeRef,
    /// After a failure: the run that was in flight, and why it failed. It is ended with status
    /// `failed` and this reason once the session has reloaded.
    pub recover: Option<(RunId, String)>,
}

/// The actor; see the module documentation.
pub(super) struct SessionActor;

/// A session's state.
pub(super) struct SessionState {
    id: SessionId,
    supervisor: NoticeRef,
    idle_after: Duration,
    /// The conversation, while no run holds it.
    session: Option<Conversation>,
    /// The run in flight.
    driving: Option<Driving>,
    idle_epoch: u64,
}

/// A run's driver as its session holds it: the way to control it, and its task, stopped
/// with the actor.
struct Driving {
    control: mpsc::UnboundedSender<Control>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Driving {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Actor for SessionActor {
    type Msg = SessionMsg;
    type State = SessionState;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: SessionArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let idle_after = Duration::from_secs(args.services.agent.session_idle_secs);
        let session = Conversation::new(
            args.id.clone(),
            args.services,
            args.events,
            args.supervisor.clone(),
            args.recover,
        );
        Ok(SessionState {
            id: args.id,
            supervisor: args.supervisor,
            idle_after,
            session: Some(session),
            driving: None,
            idle_epoch: 0,
        })
    }

    /// Loads the history off the supervisor's path: `spawn` has already returned. Where
    /// daemons share the store, a session not yet leased is not touched (a reload may write
    /// its repairs): its first run loads it once it holds the lease. A session recovering from
    /// its actor's failure holds it already.
    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(session) = state.session.as_mut() {
            if session.services.store.node().is_none() || session.recover.is_some() {
                session.reload().await;
            }
        }
        state.schedule_hibernation(&myself);
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SessionMsg::StartRun { run_id, spec } => state.start_run(&myself, run_id, spec),
            SessionMsg::RunEnded { session, ended } => {
                state.driving = None;
                state.session = Some(*session);
                ended.report();
                state.schedule_hibernation(&myself);
            }
            SessionMsg::DriverFailed { why } => {
                state.driving = None;
                return Err(format!("the run's driver failed: {why}").into());
            }
            SessionMsg::Stop { status, reason } => state.control(Control::Stop { status, reason }),
            SessionMsg::Interrupt { reason, now } => {
                state.control(Control::Interrupt { reason, now })
            }
            SessionMsg::Hibernate { epoch } => {
                if state.driving.is_none() && epoch == state.idle_epoch {
                    let request = SessionNotice::Hibernate {
                        session_id: state.id.clone(),
                    };
                    if state.supervisor.send_message(request).is_err() {
                        tracing::debug!("the session supervisor is gone");
                    }
                }
            }
            #[cfg(feature = "testing")]
            SessionMsg::Panic => panic!("injected fault in session {}", state.id),
        }
        Ok(())
    }
}

impl SessionState {
    /// Hands the conversation to a driver for the run, as a task of its own.
    fn start_run(&mut self, myself: &ActorRef<SessionMsg>, run_id: RunId, spec: RunSpec) {
        self.idle_epoch += 1;
        let Some(session) = self.session.take() else {
            // The supervisor routes one run at a time: this is a bug, reported as the run's end.
            tracing::error!(session = %self.id, "a run was started while another was in flight");
            return;
        };
        let (control, controlled) = mpsc::unbounded_channel();
        let driver = Driver::new(session, run_id, spec, controlled);
        let me = myself.clone();
        let task = tokio::spawn(async move {
            match AssertUnwindSafe(driver.drive()).catch_unwind().await {
                Ok((session, ended)) => {
                    let back = SessionMsg::RunEnded {
                        session: Box::new(session),
                        ended: Box::new(ended),
                    };
                    // The actor is gone only when it failed or stopped: the run is reported
                    // by its successor, or by the supervisor.
                    if me.cast(back).is_err() {
                        tracing::debug!("a run ended for a session that has stopped");
                    }
                }
                Err(panic) => {
                    let why = crate::supervision::panic_message(&*panic);
                    if me.cast(SessionMsg::DriverFailed { why }).is_err() {
                        tracing::debug!("a run's driver failed for a session that has stopped");
                    }
                }
            }
        });
        self.driving = Some(Driving { control, task });
    }

    /// Tells the run in flight, if any.
    fn control(&self, control: Control) {
        if let Some(driving) = &self.driving {
            if driving.control.send(control).is_err() {
                tracing::debug!(session = %self.id, "the run ended before it was told");
            }
        }
    }

    fn schedule_hibernation(&mut self, myself: &ActorRef<SessionMsg>) {
        self.idle_epoch += 1;
        let epoch = self.idle_epoch;
        myself.send_after(self.idle_after, move || SessionMsg::Hibernate { epoch });
    }
}
