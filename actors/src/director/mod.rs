//! The Director: goal-driven orchestration of a plan.
//!
//! The model is asked for a plan — a graph of steps, each with its own goal and criteria —
//! which is validated (no cycle, known dependencies, a bounded size; a refused plan is asked
//! for again, saying why) and stored. Steps whose dependencies are done run concurrently, each
//! as a run in its own session (checkpointed and, with criteria, judged), and their results
//! flow into the prompts of the steps that depend on them. A failed step is run again, then the
//! plan is revised once. When every step is done, the session's model gives the final answer,
//! judged against the run's goal. The plan's progress is stored after every change, so a run
//! cut off by a crash resumes where it stood and never redoes a finished step.

mod claims;
mod ending;
mod parking;
mod prompts;
mod stop;

pub(crate) use claims::{Directing, Directors};
pub(crate) use stop::StopSignal;

use ending::{stopped_from_outside, End, Totals};

pub(crate) use ryvos_protocol::plan::{Plan, PlanError, Step, StepEvent};
use ryvos_protocol::records::DirectedBy;
pub(crate) use ryvos_protocol::records::{PlanRecord, StepState};

use crate::checkpoint::Checkpoint;
use crate::config::DirectorConfig;
use crate::event::{EventKind, RunEvents, RunOutcome, RunStatus};
use crate::ids::{RunId, SessionId};
use crate::judge::rubric::unfenced;
use crate::judge::Goal;
use crate::llm_stream::ModelChain;
use crate::session::{RunSpec, Sessions};
use crate::store::{Store, Write, WriteBatch};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

/// What a Director needs of the engine.
#[derive(Clone)]
pub(crate) struct Director {
    pub runs: Sessions,
    /// The models every run of the plan asks, as the Director run's settings chose them.
    pub models: Arc<ModelChain>,
    pub checkpoint: Checkpoint,
    pub store: Store,
    pub config: DirectorConfig,
    /// A run's longest time, to bound the wait for each.
    pub max_run: Duration,
    /// Asked by `cancel` or `interrupt` on the Director's session.
    pub stop: StopSignal,
}

/// The step runs in flight: each gives its step's id and how its run ended.
type Steps = JoinSet<(String, Result<RunOutcome, String>)>;

impl Director {
    /// Drives a Director run on `session` to its end, publishing on `events`; it ends with
    /// `RunComplete` like any run. `held` (the claim on the session) is let go just before: a
    /// caller that starts again on seeing the end is not refused.
    pub(crate) async fn run(
        self,
        session: SessionId,
        spec: RunSpec,
        events: RunEvents,
        held: impl Send + 'static,
    ) {
        events.emit(EventKind::RunStarted {
            workspace: spec.workspace.root().display().to_string(),
            previous_workspace: None,
        });
        let mut totals = Totals::new();
        let end = match self.drive(&session, &spec, &events, &mut totals).await {
            Ok(end) | Err(end) => end,
        };
        if end.status == RunStatus::Failed {
            if let Some(reason) = &end.reason {
                events.emit(EventKind::Error {
                    message: reason.clone(),
                });
            }
        }
        drop(held);
        if let Some(reason) = end.park {
            events.emit(EventKind::RunParked {
                reason,
                message: end.reason.clone().unwrap_or_default(),
            });
        }
        events.emit(EventKind::RunComplete {
            status: end.status,
            output: end.output,
            turns: totals.turns,
            input_tokens: totals.input_tokens,
            output_tokens: totals.output_tokens,
            cost_cents: Some(totals.cost_cents),
            duration_ms: totals.duration_ms(),
            reason: end.reason,
            truncated: false,
            park_reason: end.park,
        });
    }

    async fn drive(
        &self,
        session: &SessionId,
        spec: &RunSpec,
        events: &RunEvents,
        totals: &mut Totals,
    ) -> Result<End, End> {
        let run_id = events.run_id().clone();
        let stored = self
            .store
            .plan(session)
            .await
            .map_err(|e| End::failed(format!("reading the session's plan: {e}")))?;
        let unfinished = stored.filter(|r| !r.finished);
        if let Some(old) = unfinished.as_ref().filter(|r| r.prompt != spec.prompt) {
            events.emit(EventKind::Warning {
                message: format!(
                    "the session's unfinished plan was for another task ({:?}); a new plan \
                     replaces it",
                    old.prompt.chars().take(80).collect::<String>()
                ),
            });
        }
        // The same task again on the session takes up its unfinished plan (a parked one only
        // through its continue).
        let unfinished = self.take_up_parked(unfinished, spec, totals)?;
        let mut record = match unfinished.filter(|r| r.prompt == spec.prompt) {
            Some(record) => {
                let mut record = record.resumed(run_id);
                if let Some((status, reason)) =
                    spec.continues.as_ref().and_then(|c| c.ends_as.clone())
                {
                    return Err(self.stop_parked(&mut record, spec, status, reason).await);
                }
                events.emit(EventKind::DirectorPlan {
                    plan: record.plan.clone(),
                    revision: record.revision,
                    resumed: true,
                });
                record
            }
            None => {
                let plan = self
                    .ask_for_plan(session, spec, events, totals, None)
                    .await?;
                let goal = spec.goal.as_deref().cloned();
                PlanRecord::new(session.clone(), run_id, spec.prompt.clone(), goal, plan)
            }
        };
        self.save(&record).await?;
        if let Err(end) = self.execute(&mut record, spec, events, totals).await {
            return Err(self.parked_if(end, &mut record, spec, totals).await);
        }
        // Every step is done: the session's model answers the task, judged against the goal.
        self.go_on()?;
        let prompt = prompts::final_answer(&record);
        let goal = record.goal.clone().map(Arc::new);
        let ran = self
            .run_to_end(Some(session.clone()), spec, prompt, goal)
            .await
            .map_err(End::failed)?;
        totals.add(&ran);
        // An answer stopped from outside leaves the plan unfinished: the same task again
        // asks for the answer again, without redoing a step.
        if let Some(end) = stopped_from_outside("the final answer", &Ok(ran.clone())) {
            return Err(end);
        }
        record.finished = true;
        self.save(&record).await?;
        Ok(End {
            status: ran.status,
            output: ran.output,
            reason: ran.reason,
            park: None,
        })
    }

    /// Asks the session's model for a plan (a revision, when `revising` says why), asking
    /// again with the reason while it is refused, up to `plan_attempts` times.
    async fn ask_for_plan(
        &self,
        session: &SessionId,
        spec: &RunSpec,
        events: &RunEvents,
        totals: &mut Totals,
        revising: Option<(&PlanRecord, String)>,
    ) -> Result<Plan, End> {
        let revision = revising.as_ref().map_or(0, |(r, _)| r.revision + 1);
        let mut prompt = match &revising {
            None => prompts::plan(&spec.prompt, spec.goal.as_deref(), self.config.max_steps),
            Some((record, why)) => prompts::revise(record, why, self.config.max_steps),
        };
        let mut refusals = Vec::new();
        for _ in 0..self.config.plan_attempts.max(1) {
            self.go_on()?;
            let ran = self
                .run_to_end(Some(session.clone()), spec, prompt, None)
                .await
                .map_err(End::failed)?;
            totals.add(&ran);
            if ran.status != RunStatus::Completed {
                return Err(End {
                    park: None,
                    status: ran.status,
                    output: ran.output,
                    reason: Some(format!(
                        "asking for a plan: {}",
                        ran.reason.unwrap_or_else(|| ran.status.to_string())
                    )),
                });
            }
            match Plan::parse(unfenced(&ran.output), self.config.max_steps) {
                Ok(plan) => {
                    events.emit(EventKind::DirectorPlan {
                        plan: plan.clone(),
                        revision,
                        resumed: false,
                    });
                    return Ok(plan);
                }
                Err(e) => {
                    events.emit(EventKind::Warning {
                        message: format!("the plan was refused and is asked for again: {e}"),
                    });
                    prompt = prompts::refused(&e);
                    refusals.push(e.to_string());
                }
            }
        }
        Err(End::failed(format!(
            "no valid plan after {} attempts: {}",
            refusals.len(),
            refusals.join("; ")
        )))
    }

    /// Runs the plan's steps until all are done: ready steps concurrently, failed ones again,
    /// then a revised plan once.
    async fn execute(
        &self,
        record: &mut PlanRecord,
        spec: &RunSpec,
        events: &RunEvents,
        totals: &mut Totals,
    ) -> Result<(), End> {
        let mut running = JoinSet::new();
        let done = self
            .run_steps(record, spec, events, totals, &mut running)
            .await;
        if let Some(end) = done.as_ref().err().filter(|end| end.park.is_none()) {
            // The steps still running end with the run, as it did: paused if it was
            // interrupted, for good otherwise (a parked plan waited for them already).
            let status = match end.status {
                RunStatus::Interrupted => RunStatus::Interrupted,
                _ => RunStatus::Cancelled,
            };
            let why = end.reason.clone().unwrap_or_else(|| end.status.to_string());
            self.stop
                .stop(status, format!("the Director run ended: {why}"));
            while let Some(joined) = running.join_next().await {
                if let Ok((_, Ok(ran))) = joined {
                    totals.add(&ran);
                }
            }
        }
        done
    }

    /// The step loop of [`Self::execute`]; the steps it leaves running are in `running`.
    async fn run_steps(
        &self,
        record: &mut PlanRecord,
        spec: &RunSpec,
        events: &RunEvents,
        totals: &mut Totals,
        running: &mut Steps,
    ) -> Result<(), End> {
        // The continued steps' runs, as they parked (what they had spent is counted already).
        let mut continued = (self.continue_parked_steps(record, spec, events, running)).await?;
        // Set once a step parks: no step starts after it, and the run parks once the steps in
        // flight have ended.
        let mut parked = None;
        loop {
            self.go_on()?;
            let free = self.config.max_parallel_steps.max(1);
            let ready = record
                .ready()
                .into_iter()
                .take(free.saturating_sub(running.len()))
                .filter(|_| parked.is_none());
            let mut started = false;
            for id in ready {
                started |= self.start_step(record, id, spec, events, running);
            }
            // Steps now in flight are on record (finished ones were saved as they ended).
            if started {
                self.save(record).await?;
            }
            let Some(joined) = running.join_next().await else {
                if let Some(end) = parked {
                    return Err(end);
                }
                if record.all_done() {
                    return Ok(());
                }
                // Nothing runs and nothing can start: only a validated plan's failure gets here.
                return Err(End::failed(
                    "the plan cannot go on: no step is ready".into(),
                ));
            };
            let (id, ran) =
                joined.map_err(|e| End::failed(format!("a step's task failed: {e}")))?;
            if let Some(end) = stopped_from_outside(&format!("step '{id}'"), &ran) {
                return Err(end);
            }
            match (&ran, continued.remove(&id)) {
                (Ok(r), Some(counted)) => totals.add_continued(r, &counted),
                (Ok(r), None) => totals.add(r),
                (Err(_), _) => {}
            }
            let (status, detail) = self.record_step(record, &id, &ran, events);
            // A finished step is durable before anything depends on it.
            self.save(record).await?;
            if let (StepEvent::Parked, Ok(ran)) = (status, &ran) {
                parked.get_or_insert_with(|| parking::step_parked(&id, ran, events.run_id()));
            }
            // A parked plan is revised, if it must be, once it goes on.
            if status == StepEvent::Failed && parked.is_none() {
                let attempts = record.steps.get(&id).map_or(0, |p| p.attempts);
                if record.revision > 0 {
                    return Err(End::failed(format!(
                        "step '{id}' failed after the plan was already revised: {detail}"
                    )));
                }
                let why = format!("step '{id}' failed {attempts} time(s): {detail}");
                let plan = self
                    .ask_for_plan(
                        &record.session_id.clone(),
                        spec,
                        events,
                        totals,
                        Some((record, why)),
                    )
                    .await?;
                record.revise(plan);
            }
        }
    }

    /// Starts step `id` in its own session, held to the step's goal; whether it started.
    fn start_step(
        &self,
        record: &mut PlanRecord,
        id: String,
        spec: &RunSpec,
        events: &RunEvents,
        running: &mut Steps,
    ) -> bool {
        let Some(step) = record.plan.step(&id).cloned() else {
            return false;
        };
        let progress = record.steps.entry(id.clone()).or_default();
        progress.state = StepState::Running;
        progress.attempts += 1;
        let prompt = prompts::step(record, &step);
        // Every step is judged: by its criteria, or (with none) by the judge model.
        let mut constraints = record
            .goal
            .as_ref()
            .map(|g| g.constraints.clone())
            .unwrap_or_default();
        // Time and cost bound the task as a whole, not each step.
        (constraints.time_secs, constraints.cost_cents) = (None, None);
        let goal = Some(Arc::new(Goal {
            description: step.goal.clone(),
            criteria: step.criteria.clone(),
            constraints,
        }));
        let child = record.step_session(&id);
        events.emit(EventKind::DirectorStep {
            step: id.clone(),
            status: StepEvent::Started,
            step_session_id: child.clone(),
            step_run_id: None,
            detail: String::new(),
        });
        // A step parks at a budget (unless the run said not to): the plan parks with it.
        let directed_by = DirectedBy {
            session_id: record.session_id.clone(),
            run_id: record.run_id.clone(),
        };
        let spec = RunSpec {
            prompt,
            goal,
            continues: None,
            directed_by: Some(directed_by),
            ..spec.clone()
        };
        self.spawn_step(running, id, child, spec);
        true
    }

    /// Runs `spec` on step `id`'s session `child` among the steps `running`.
    fn spawn_step(&self, running: &mut Steps, id: String, child: SessionId, spec: RunSpec) {
        let director = self.clone();
        running.spawn(async move {
            let ran = director.run_spec_to_end(Some(child), spec).await;
            (id, ran)
        });
    }

    /// Records how step `id` ended (done, to retry, or failed) and says so; its status and
    /// what it gave.
    fn record_step(
        &self,
        record: &mut PlanRecord,
        id: &str,
        ran: &Result<RunOutcome, String>,
        events: &RunEvents,
    ) -> (StepEvent, String) {
        let (ok, run_id, detail) = match ran {
            Ok(r) if r.status == RunStatus::Completed => {
                (true, Some(r.run_id.clone()), r.output.clone())
            }
            Ok(r) if r.status == RunStatus::Parked => {
                return parking::record_parked_step(record, id, r, events);
            }
            Ok(r) => (
                false,
                Some(r.run_id.clone()),
                format!("{}: {}", r.status, r.reason.clone().unwrap_or_default()),
            ),
            Err(e) => (false, None, e.clone()),
        };
        let progress = record.steps.entry(id.to_owned()).or_default();
        progress.run_id = run_id.clone();
        progress.output = detail.clone();
        let status = if ok {
            progress.state = StepState::Done;
            StepEvent::Completed
        } else if progress.attempts <= self.config.step_retries {
            progress.state = StepState::Pending;
            StepEvent::Retrying
        } else {
            progress.state = StepState::Failed;
            StepEvent::Failed
        };
        events.emit(EventKind::DirectorStep {
            step: id.to_owned(),
            status,
            step_session_id: record.step_session(id),
            step_run_id: run_id,
            detail: detail.clone(),
        });
        (status, detail)
    }

    /// Starts a run and waits for its end.
    async fn run_to_end(
        &self,
        session: Option<SessionId>,
        spec: &RunSpec,
        prompt: String,
        goal: Option<Arc<Goal>>,
    ) -> Result<RunOutcome, String> {
        let mut spec = RunSpec {
            prompt,
            goal,
            continues: None,
            ..spec.clone()
        };
        // The plan and the final answer end at a budget: only steps park.
        spec.settings.on_limit = Some(crate::config::OnLimit::Stop);
        self.run_spec_to_end(session, spec).await
    }

    /// Starts the run `spec` describes and waits for its end.
    async fn run_spec_to_end(
        &self,
        session: Option<SessionId>,
        spec: RunSpec,
    ) -> Result<RunOutcome, String> {
        let ticket = self
            .runs
            .start(session, spec, self.models.clone())
            .await
            .map_err(|e| e.to_string())?;
        let session_id = ticket.session_id.clone();
        let run_id = ticket.run_id.clone();
        let mut events = ticket.events;
        let waiting = async {
            loop {
                match events.recv().await {
                    Ok(event) if event.run_id == run_id => {
                        if let Some(ran) = RunOutcome::from_event(&event) {
                            return Ok(ran);
                        }
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        // Its end may have been among the missed events: the store knows.
                        if let Some(ran) = self.stored_end(&session_id, &run_id).await {
                            return Ok(ran);
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        return Err(format!("run {run_id} ended without reporting its end"))
                    }
                }
            }
        };
        // Every stop asked of the Director is passed on to this run, which then ends as it says.
        let passing_on = self.stop.each(|stop| {
            let session_id = session_id.clone();
            async move {
                if let Err(e) = self.runs.stop(&session_id, stop.status, &stop.reason).await {
                    tracing::warn!(session = %session_id, "a step run could not be stopped: {e}");
                }
            }
        });
        let ended = async {
            tokio::select! {
                ran = waiting => ran,
                never = passing_on => match never {},
            }
        };
        tokio::time::timeout(self.max_run + Duration::from_secs(60), ended)
            .await
            .map_err(|_| format!("run {run_id} did not end within its max_duration_secs"))?
    }

    /// Whether the run may go on: not if a stop was asked.
    fn go_on(&self) -> Result<(), End> {
        match self.stop.requested() {
            Some(stop) => Err(End::stopped(stop)),
            None => Ok(()),
        }
    }

    /// The end of run `run_id` as its record says, if it has ended.
    async fn stored_end(&self, session: &SessionId, run_id: &RunId) -> Option<RunOutcome> {
        let runs = self.store.session_runs(session).await.ok()?;
        let run = runs.into_iter().find(|r| r.run_id == *run_id)?;
        Some(RunOutcome {
            session_id: run.session_id,
            run_id: run.run_id,
            status: run.status?,
            output: run.output,
            reason: run.reason,
            turns: run.turns,
            input_tokens: run.input_tokens,
            output_tokens: run.output_tokens,
            cost_cents: Some(run.cost_microcents as f64 / 1_000_000.0),
            duration_ms: run.ended_at_ms?.saturating_sub(run.started_at_ms),
            truncated: false,
            park_reason: run.park_reason,
        })
    }

    /// Stores the plan's progress and waits until it is durable.
    async fn save(&self, record: &PlanRecord) -> Result<(), End> {
        let batch = WriteBatch::of(record.session_id.clone(), [Write::Plan(record.clone())]);
        crate::checkpoint::store(&self.checkpoint, batch)
            .await
            .map_err(|e| End::failed(format!("the plan's progress could not be stored: {e}")))
    }
}
