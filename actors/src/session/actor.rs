//! SessionActor: one conversation, and the run driving it.
//!
//! The actor owns the session's lifecycle: it loads the conversation, starts a run (handing the
//! conversation to the run's [`Driver`], a task of its own), and asks to hibernate when idle.
//! The conversation and the run in flight sit on the session's [`Desk`], which outlives the
//! actor: an actor that fails is restarted and takes up where it was, its run going on. A
//! driver that fails is the end of its run: the session is reloaded from the store and the run
//! reported failed.

use super::conversation::Conversation;
use super::desk::{Desk, DeskRef};
use super::driver::{Control, Driver};
use super::notice::{NoticeRef, SessionNotice};
use super::{RunSpec, Services};
use crate::event::SessionEvents;
use crate::ids::{RunId, SessionId};
use crate::llm_stream::ModelChain;
use futures_util::FutureExt;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Messages of the [`SessionActor`].
pub(super) enum SessionMsg {
    /// Start a run (the supervisor has checked that none is in flight), told through
    /// `control` (which the supervisor holds from the start).
    StartRun {
        run_id: RunId,
        spec: Box<RunSpec>,
        /// The models it asks, as its settings chose them.
        models: Arc<ModelChain>,
        control: mpsc::UnboundedReceiver<Control>,
    },
    /// The run's driver is done and has put the conversation back on the desk.
    RunEnded,
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
    /// After its run's driver failed: that run, and why. It is ended with status `failed` and
    /// this reason once the session has reloaded.
    pub recover: Option<(RunId, String)>,
    pub desk: Arc<Desk>,
}

/// The actor; see the module documentation.
pub(super) struct SessionActor;

/// A session's state.
pub(super) struct SessionState {
    id: SessionId,
    supervisor: NoticeRef,
    idle_after: Duration,
    desk: Arc<Desk>,
    idle_epoch: u64,
}

impl Actor for SessionActor {
    type Msg = SessionMsg;
    type State = SessionState;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: SessionArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let desk = args.desk;
        desk.attach(Arc::new(move || myself.cast(SessionMsg::RunEnded).is_ok()));
        let (id, services) = (args.id.clone(), args.services.clone());
        let (events, supervisor) = (args.events, args.supervisor.clone());
        desk.take_up(args.recover, move |recover| {
            Conversation::new(id, services, events, supervisor, recover)
        });
        Ok(SessionState {
            id: args.id,
            supervisor: args.supervisor,
            idle_after: Duration::from_secs(args.services.agent.session_idle_secs),
            desk,
            idle_epoch: 0,
        })
    }

    /// Loads the history off the supervisor's path: `spawn` has already returned. Where
    /// daemons share the store, a session not yet leased is not touched (a reload may write
    /// its repairs): its first run loads it once it holds the lease. A session recovering from
    /// its driver's failure holds it already.
    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(mut conversation) = state.desk.take_conversation() {
            let services = &conversation.services;
            if services.store.node().is_none() || conversation.recover.is_some() {
                conversation.reload().await;
            }
            state.desk.put_conversation(conversation);
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
            SessionMsg::StartRun {
                run_id,
                spec,
                models,
                control,
            } => state.start_run(run_id, *spec, models, control)?,
            SessionMsg::RunEnded => state.schedule_hibernation(&myself),
            SessionMsg::Hibernate { epoch } => {
                if !state.desk.is_driving() && epoch == state.idle_epoch {
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
    fn start_run(
        &mut self,
        run_id: RunId,
        spec: RunSpec,
        models: Arc<ModelChain>,
        control: mpsc::UnboundedReceiver<Control>,
    ) -> Result<(), ActorProcessingErr> {
        self.idle_epoch += 1;
        // The supervisor routes one run at a time, after the last one gave the session back;
        // if not, the actor fails and the supervisor's recovery ends the run with the reason.
        let conversation = self.desk.take_conversation().ok_or_else(|| {
            format!("run {run_id} was started while another run held the session")
        })?;
        let driver = Driver::new(conversation, run_id, &spec, models, control);
        let desk = Arc::downgrade(&self.desk);
        let (supervisor, session_id) = (self.supervisor.clone(), self.id.clone());
        // Driven from before the task exists, so a run that ends at once is seen to end.
        self.desk.driving();
        let task = tokio::spawn(drive(driver, spec, desk, supervisor, session_id));
        self.desk.spawned(task);
        Ok(())
    }

    fn schedule_hibernation(&mut self, myself: &ActorRef<SessionMsg>) {
        self.idle_epoch += 1;
        let epoch = self.idle_epoch;
        myself.send_after(self.idle_after, move || SessionMsg::Hibernate { epoch });
    }
}

/// Drives the run; then puts the conversation back on the desk before the run's end is
/// reported (the next run may start as soon as it is), and tells the session's actor. A driver
/// that fails is reported to the supervisor, which has the session reloaded and the run
/// reported failed.
async fn drive(
    driver: Driver,
    spec: RunSpec,
    desk: DeskRef,
    supervisor: NoticeRef,
    session_id: SessionId,
) {
    match AssertUnwindSafe(driver.drive(spec)).catch_unwind().await {
        Ok((conversation, ended)) => {
            // A session given up has reported its run already.
            let Some(desk) = desk.upgrade() else { return };
            let actor = desk.ended(conversation);
            ended.report();
            if !actor.is_some_and(|tell| tell()) {
                tracing::debug!("a run ended while its session's actor was down");
            }
        }
        Err(panic) => {
            if let Some(desk) = desk.upgrade() {
                desk.driver_failed();
            }
            let why = crate::supervision::panic_message(&*panic);
            let failed = SessionNotice::DriverFailed { session_id, why };
            if supervisor.send_message(failed).is_err() {
                tracing::warn!("a run's driver failed and the session supervisor is gone");
            }
        }
    }
}
