//! SessionSupervisor: one [`SessionActor`] per active session.
//!
//! It starts a session's actor on its first run, routes runs to it, refuses past
//! `max_in_flight_runs` with a clear "busy" (never an unbounded queue), and decides when an idle
//! session hibernates, so a run is never routed to an actor that is stopping. A session actor
//! that fails is restarted with backoff, and its run goes on (it is driven by a task of its
//! own, kept on the session's desk); a run whose driver fails ends `failed` with the reason,
//! once the restarted actor has reloaded the session from the store. Too many failures in the
//! window and the session is given up, its run reported failed.

use super::actor::{SessionActor, SessionArgs, SessionMsg};
use super::desk::Desk;
use super::driver::Control;
pub(crate) use super::in_flight::RunsInFlight;
use super::recovery::{lost_run_reason, report_lost_run};
pub(crate) use super::supervisor_msg::{IdleWork, SessionSupervisorMsg};
use super::supervisor_msg::{RunTicket, StartRunError};
use super::{RunSpec, Services, SessionNotice};
use crate::event::SessionEvents;
use crate::ids::{RunId, SessionId};
use crate::supervision::{RestartDecision, RestartHistory, RestartPolicy};
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a shutdown waits for runs to record their end.
const STOP_ALL_TIMEOUT: Duration = Duration::from_secs(30);

struct Entry {
    /// `None` while the actor is being restarted.
    actor: Option<ActorRef<SessionMsg>>,
    /// What outlives the actor: the conversation and the run in flight.
    desk: Arc<Desk>,
    events: SessionEvents,
    active_run: Option<RunId>,
    restarts: RestartHistory,
    /// The run to end as failed when the restarted actor comes up.
    recover: Option<(RunId, String)>,
}

/// The actor; see the module documentation.
pub(crate) struct SessionSupervisor;

/// What it is started with.
#[derive(Clone)]
pub(crate) struct SessionSupervisorArgs {
    pub services: Services,
    pub policy: RestartPolicy,
    pub max_in_flight_runs: usize,
    pub in_flight: RunsInFlight,
}

/// Its state.
pub(crate) struct SessionSupervisorState {
    args: SessionSupervisorArgs,
    sessions: HashMap<SessionId, Entry>,
    by_actor: HashMap<ActorId, SessionId>,
    stopping: Option<RpcReplyPort<()>>,
    shutting_down: bool,
    /// Sessions work is being done on between their runs (a rewind): no run starts on them.
    reserved: HashSet<SessionId>,
}

impl Actor for SessionSupervisor {
    type Msg = SessionSupervisorMsg;
    type State = SessionSupervisorState;
    type Arguments = SessionSupervisorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: SessionSupervisorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        // A supervisor restarted has no runs: they ended with its failure.
        args.in_flight.reset();
        Ok(SessionSupervisorState {
            args,
            sessions: HashMap::new(),
            by_actor: HashMap::new(),
            stopping: None,
            shutting_down: false,
            reserved: HashSet::new(),
        })
    }

    /// Long because it is the supervisor's one dispatch: an arm per message, each short.
    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SessionSupervisorMsg::StartRun {
                session_id,
                spec,
                models,
                reply,
            } => {
                let answer = state.start_run(&myself, session_id, *spec, models).await;
                if reply.send(answer).is_err() {
                    tracing::debug!("a run's caller left before it was accepted");
                }
            }
            SessionSupervisorMsg::Notice(SessionNotice::RunFinished { session_id, run_id }) => {
                if let Some(entry) = state.sessions.get_mut(&session_id) {
                    if entry.active_run.as_ref() == Some(&run_id) {
                        entry.active_run = None;
                        state.args.in_flight.remove(&run_id);
                    }
                    // A recovered run has been reported by the restarted actor.
                    if entry.recover.as_ref().is_some_and(|(r, _)| *r == run_id) {
                        entry.recover = None;
                    }
                    if entry.active_run.is_none() {
                        // An idle session holds no event buffer.
                        entry.events.release();
                    }
                }
                state.answer_stop_all_if_done();
            }
            SessionSupervisorMsg::Notice(SessionNotice::DriverFailed { session_id, why }) => {
                state.driver_failed(session_id, why);
            }
            SessionSupervisorMsg::Notice(SessionNotice::Hibernate { session_id }) => {
                let idle = state
                    .sessions
                    .get(&session_id)
                    .is_some_and(|e| e.active_run.is_none() && e.actor.is_some());
                if idle {
                    if let Some(actor) = state.sessions.remove(&session_id).and_then(|e| e.actor) {
                        state.by_actor.remove(&actor.get_id());
                        actor.stop(Some("idle".into()));
                    }
                }
            }
            SessionSupervisorMsg::Restart { session_id } => {
                state.restart(&myself, session_id).await;
            }
            SessionSupervisorMsg::StopAll { reason, reply } => {
                state.shutting_down = true;
                state.stopping = Some(reply);
                for entry in state.sessions.values() {
                    if entry.active_run.is_some() {
                        // Paused, not closed: the runs go on when their sessions resume.
                        let stop = Control::Interrupt {
                            reason: reason.clone(),
                            now: true,
                        };
                        if !entry.desk.control(stop) {
                            tracing::warn!("a run ended before it could be told to stop");
                        }
                    }
                }
                myself.send_after(STOP_ALL_TIMEOUT, || SessionSupervisorMsg::StopAllTimeout);
                state.answer_stop_all_if_done();
            }
            SessionSupervisorMsg::StopRun {
                session_id,
                status,
                reason,
                reply,
            } => {
                let stopped = state.control(&session_id, Control::Stop { status, reason });
                if reply.send(stopped).is_err() {
                    tracing::debug!("the caller of a stop left");
                }
            }
            SessionSupervisorMsg::InterruptRun {
                session_id,
                reason,
                reply,
            } => {
                let interrupt = Control::Interrupt { reason, now: false };
                let asked = state.control(&session_id, interrupt);
                if reply.send(asked).is_err() {
                    tracing::debug!("the caller of an interrupt left");
                }
            }
            SessionSupervisorMsg::WhileIdle {
                session_id,
                work,
                why,
                reply,
            } => {
                let idle = state.while_idle(&myself, session_id, work, why);
                if reply.send(idle).is_err() {
                    tracing::debug!("the caller of work on an idle session left");
                }
            }
            SessionSupervisorMsg::Released { session_id } => {
                state.reserved.remove(&session_id);
            }
            SessionSupervisorMsg::Services { reply } => {
                if reply.send(state.args.services.clone()).is_err() {
                    tracing::debug!("the caller for the services left");
                }
            }
            SessionSupervisorMsg::StopAllTimeout => {
                if let Some(reply) = state.stopping.take() {
                    tracing::warn!(
                        in_flight = state.args.in_flight.count(),
                        "shutdown went on before every run had recorded its end"
                    );
                    if reply.send(()).is_err() {
                        tracing::debug!("the shutdown's caller left");
                    }
                }
            }
            #[cfg(feature = "testing")]
            SessionSupervisorMsg::PanicSession {
                session_id,
                driver: true,
                reply,
            } => {
                let found = state.control(&session_id, Control::Panic);
                if reply.send(found).is_err() {
                    tracing::debug!("the fault injector left");
                }
            }
            #[cfg(feature = "testing")]
            SessionSupervisorMsg::PanicSession {
                session_id,
                driver: false,
                reply,
            } => {
                let actor = state
                    .sessions
                    .get(&session_id)
                    .and_then(|e| e.actor.clone());
                let found = actor.is_some_and(|a| a.cast(SessionMsg::Panic).is_ok());
                if reply.send(found).is_err() {
                    tracing::debug!("the fault injector left");
                }
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<Self::Msg>,
        _state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Waiting means no session still holds the store once this supervisor is gone.
        myself
            .stop_children_and_wait(
                Some("the session supervisor stopped".into()),
                Some(STOP_ALL_TIMEOUT),
            )
            .await;
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorFailed(cell, error) => {
                state.on_session_down(&myself, cell.get_id(), format!("it panicked: {error}"));
            }
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                let why = reason.unwrap_or_else(|| "it stopped".into());
                state.on_session_down(&myself, cell.get_id(), why);
            }
            _ => {}
        }
        Ok(())
    }
}

impl SessionSupervisorState {
    async fn start_run(
        &mut self,
        myself: &ActorRef<SessionSupervisorMsg>,
        session_id: Option<SessionId>,
        spec: RunSpec,
        models: Arc<crate::llm_stream::ModelChain>,
    ) -> Result<RunTicket, StartRunError> {
        if self.shutting_down {
            return Err(StartRunError::ShuttingDown);
        }
        let limit = self.args.max_in_flight_runs;
        if self.args.in_flight.count() >= limit {
            return Err(StartRunError::Busy { limit });
        }
        let session_id = session_id.unwrap_or_else(SessionId::generate);
        if self.reserved.contains(&session_id) {
            return Err(StartRunError::SessionBusy(session_id));
        }
        if !self.sessions.contains_key(&session_id) {
            let events = SessionEvents::new(self.args.services.global_events.clone());
            let desk = Desk::new();
            let actor = self
                .spawn_session(myself, &session_id, events.clone(), None, desk.clone())
                .await?;
            self.sessions.insert(
                session_id.clone(),
                Entry {
                    actor: Some(actor),
                    desk,
                    events,
                    active_run: None,
                    restarts: RestartHistory::default(),
                    recover: None,
                },
            );
        }
        let Some(entry) = self.sessions.get_mut(&session_id) else {
            return Err(StartRunError::Spawn("the session vanished".into()));
        };
        let Some(actor) = entry.actor.clone() else {
            return Err(StartRunError::Recovering(session_id));
        };
        if entry.active_run.is_some() {
            return Err(StartRunError::SessionBusy(session_id));
        }
        // A parked run goes on under its own id.
        let run_id =
            (spec.continues.as_ref()).map_or_else(RunId::generate, |c| c.parked.run_id.clone());
        let (events, control) = (entry.events.subscribe(), entry.desk.run_starting());
        let listed = RunsInFlight::listing(&run_id, &session_id, &spec.prompt);
        actor
            .cast(SessionMsg::StartRun {
                run_id: run_id.clone(),
                spec: Box::new(spec),
                models,
                control,
            })
            .map_err(|_| StartRunError::Recovering(session_id.clone()))?;
        entry.active_run = Some(run_id.clone());
        self.args.in_flight.add(listed);
        Ok(RunTicket {
            session_id,
            run_id,
            events,
        })
    }

    async fn spawn_session(
        &mut self,
        myself: &ActorRef<SessionSupervisorMsg>,
        session_id: &SessionId,
        events: SessionEvents,
        recover: Option<(RunId, String)>,
        desk: Arc<Desk>,
    ) -> Result<ActorRef<SessionMsg>, StartRunError> {
        let args = SessionArgs {
            id: session_id.clone(),
            services: self.args.services.clone(),
            events,
            supervisor: myself.get_derived(),
            recover,
            desk,
        };
        let (actor, _) = Actor::spawn_linked(None, SessionActor, args, myself.get_cell())
            .await
            .map_err(|e| StartRunError::Spawn(e.to_string()))?;
        self.by_actor.insert(actor.get_id(), session_id.clone());
        Ok(actor)
    }

    fn on_session_down(
        &mut self,
        myself: &ActorRef<SessionSupervisorMsg>,
        actor: ActorId,
        why: String,
    ) {
        // Unknown actors are sessions already removed by hibernation.
        let Some(session_id) = self.by_actor.remove(&actor) else {
            return;
        };
        let Some(entry) = self.sessions.get_mut(&session_id) else {
            return;
        };
        entry.actor = None;
        tracing::error!(session = %session_id, "session actor went down: {why}");
        let decision = entry.restarts.on_failure(&self.args.policy, Instant::now());
        match decision {
            RestartDecision::Restart { after, attempt } if !self.shutting_down => {
                tracing::warn!(session = %session_id, attempt, "restarting the session in {after:?}");
                if entry.desk.is_driving() {
                    tracing::warn!(session = %session_id, "its run goes on meanwhile");
                } else if let Some(run_id) = entry.active_run.take() {
                    // A run whose driver is gone without reporting: the restarted actor
                    // reloads the session and reports it failed.
                    self.args.in_flight.remove(&run_id);
                    entry.recover = Some((run_id, lost_run_reason(&why)));
                }
                let id = session_id.clone();
                myself.send_after(after, move || SessionSupervisorMsg::Restart {
                    session_id: id,
                });
            }
            // Not restarted while the runtime stops; its run, told to pause, is driven without
            // it and reports its own end (`interrupted`), as every run the stop pauses does.
            _ if self.shutting_down && entry.desk.is_driving() => {
                tracing::warn!(session = %session_id, "not restarted while stopping; its run pauses without it");
            }
            decision => {
                let run = entry.active_run.take();
                if let Some(run) = &run {
                    self.args.in_flight.remove(run);
                }
                // A run still waiting to be reported by an actor that failed stays owed.
                let run = run.or_else(|| entry.recover.take().map(|(r, _)| r));
                if let Some(run_id) = run {
                    let reason = lost_run_reason(&why);
                    let why = match decision {
                        RestartDecision::GiveUp { restarts_in_window } => format!(
                            "{reason}; it failed {restarts_in_window} times in a row, so the \
                             session was given up until its next run"
                        ),
                        _ => reason,
                    };
                    report_lost_run(&entry.events, &session_id, run_id, why);
                }
                // Its desk goes with it, and a run still driven is stopped.
                self.sessions.remove(&session_id);
            }
        }
        self.answer_stop_all_if_done();
    }

    /// Does `work` on session `id` while no run is in flight on it (none can start
    /// meanwhile: the supervisor routes runs); its copy in memory, which holds what the work
    /// changed in the store, is dropped, so that its next run reads the store afresh. Whether
    /// the session was idle.
    fn while_idle(
        &mut self,
        myself: &ActorRef<SessionSupervisorMsg>,
        id: SessionId,
        work: IdleWork,
        why: &'static str,
    ) -> bool {
        let busy = self
            .sessions
            .get(&id)
            .is_some_and(|e| e.active_run.is_some() || e.recover.is_some() || e.desk.is_driving());
        if busy || !self.reserved.insert(id.clone()) {
            return false;
        }
        if let Some(actor) = self.sessions.remove(&id).and_then(|e| e.actor) {
            self.by_actor.remove(&actor.get_id());
            actor.stop(Some(why.into()));
        }
        // Done in a task of its own: the supervisor goes on routing every other session.
        let services = self.args.services.clone();
        let release = Release(myself.clone(), Some(id));
        tokio::spawn(async move {
            work(services).await;
            drop(release);
        });
        true
    }

    async fn restart(&mut self, myself: &ActorRef<SessionSupervisorMsg>, session_id: SessionId) {
        let Some(entry) = self.sessions.get_mut(&session_id) else {
            return;
        };
        let events = entry.events.clone();
        // Kept until the new actor reports the run (RunFinished), in case it fails first.
        let recover = entry.recover.clone();
        let desk = entry.desk.clone();
        match self
            .spawn_session(myself, &session_id, events.clone(), recover.clone(), desk)
            .await
        {
            Ok(actor) => {
                if let Some(entry) = self.sessions.get_mut(&session_id) {
                    entry.actor = Some(actor);
                }
            }
            Err(e) => {
                tracing::error!(session = %session_id, "could not restart the session: {e}");
                // A run still driven is stopped with the session's desk: it is reported here.
                let driven = self.sessions.get_mut(&session_id).and_then(|entry| {
                    let reason = lost_run_reason("it could not be restarted");
                    entry.active_run.take().map(|run| (run, reason))
                });
                if let Some((run, _)) = &driven {
                    self.args.in_flight.remove(run);
                }
                if let Some((run_id, reason)) = recover.or(driven) {
                    report_lost_run(
                        &events,
                        &session_id,
                        run_id,
                        format!("{reason}; restarting it failed: {e}"),
                    );
                }
                self.sessions.remove(&session_id);
            }
        }
    }

    /// Tells the run in flight on `session_id`; whether there was one.
    fn control(&self, session_id: &SessionId, control: Control) -> bool {
        self.sessions
            .get(session_id)
            .is_some_and(|e| e.active_run.is_some() && e.desk.control(control))
    }

    /// The driver of `session_id`'s run failed: its actor is stopped, and restarted to reload
    /// the session and report the run failed (see [`Self::on_session_down`]).
    fn driver_failed(&mut self, id: SessionId, why: String) {
        let Some(entry) = self.sessions.get_mut(&id) else {
            return;
        };
        let why = format!("its run's driver panicked: {why}");
        match &entry.actor {
            Some(actor) => actor.stop(Some(why)),
            // Being restarted already: the new actor reports the run.
            None => {
                if let Some(run_id) = entry.active_run.take() {
                    self.args.in_flight.remove(&run_id);
                    entry.recover = Some((run_id, lost_run_reason(&why)));
                }
            }
        }
    }

    fn answer_stop_all_if_done(&mut self) {
        if self.args.in_flight.count() == 0 {
            if let Some(reply) = self.stopping.take() {
                if reply.send(()).is_err() {
                    tracing::debug!("the shutdown's caller left");
                }
            }
        }
    }
}

/// Releases a session reserved for work between its runs when dropped: when the work ends,
/// however it ends.
struct Release(ActorRef<SessionSupervisorMsg>, Option<SessionId>);

impl Drop for Release {
    fn drop(&mut self) {
        if let Some(session_id) = self.1.take() {
            if self
                .0
                .cast(SessionSupervisorMsg::Released { session_id })
                .is_err()
            {
                tracing::debug!("the supervisor stopped while work was done on a session");
            }
        }
    }
}
