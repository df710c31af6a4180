//! SessionActor: one conversation and the run it is driving.
//!
//! The loop, as states (see [`Phase`]): a model request goes out; its answer is appended; an
//! answer without tool calls ends the run; otherwise the calls run (after the turn is durable,
//! if any call has side effects), their results are appended paired with their calls, the turn
//! is checkpointed, and the next request goes out at once while the commit proceeds. A run ends
//! by answer, `max_turns`, `max_duration_secs`, a stop, or an error; its end is reported only
//! once everything it wrote is durable.
//!
//! Around each model call the cost ledger is asked first (is the budget left?) and told after
//! (what the call used); after each turn the Guardian reviews it, and a timer reports a stall
//! to it. Their answers (hints, a retry, a stop) are applied here.

use super::commits::Commits;
use super::history::History;
use super::oversight::{self, Refusal};
use super::prompt::system_prompt;
use super::recovery::{self, Reloaded};
use super::run::{ActiveRun, Ending, Phase};
use super::supervisor::SessionSupervisorMsg;
use super::{RunSpec, Services};
use crate::callback::Callback;
use crate::checkpoint::CheckpointMsg;
use crate::cost_ledger::{PriceSource, UsageReport};
use crate::event::{EventKind, RunEvents, RunStatus, SessionEvents, StallPhase};
use crate::guardian::{CallReport, GuardianMsg, Review, TurnReport};
use crate::ids::{RunId, SessionId};
use crate::llm_stream::{Heartbeat, LlmMsg, ModelReply, StreamJob};
use crate::message::{Message, ToolCall};
use crate::provider::{ChatRequest, ProviderError, Usage};
use crate::store::{now_ms, RunRecord, SessionRecord, StoreError, TurnCheckpoint, WriteBatch};
use crate::tools::executor::{lost_outcomes, ToolBatch, ToolMsg, ToolOutcome};
use crate::tools::ToolContext;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A step number never used before in this process. Every dispatch (model request, tool batch,
/// final commit) takes one, and a reply is accepted only if it carries the step of the run in
/// flight, so a late reply from an earlier run (or an earlier phase) can never be mistaken for
/// a current one.
fn next_step() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// How long a finished run may wait for its last commit before it is reported failed.
const FINAL_COMMIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Messages of the [`SessionActor`].
pub enum SessionMsg {
    /// Start a run (the supervisor has checked that none is in flight).
    StartRun { run_id: RunId, spec: RunSpec },
    /// The model answered (or failed) the request sent at `step`.
    ModelDone {
        step: u64,
        result: Result<ModelReply, ProviderError>,
    },
    /// The calls dispatched at `step` finished.
    ToolsDone {
        step: u64,
        outcomes: Vec<ToolOutcome>,
    },
    /// The oldest batch not yet confirmed was committed (or failed).
    Committed { result: Result<(), StoreError> },
    /// Time to look for a stall of the dispatch made at `step`.
    StallCheck { step: u64 },
    /// The run `run_id` reached `max_duration_secs`.
    Deadline { run_id: RunId },
    /// The final commit of the run ending at `step` took too long.
    FinalCommitTimeout { step: u64 },
    /// End the run in flight with `status`.
    Stop { status: RunStatus, reason: String },
    /// Ask the supervisor to stop this actor if it is still idle since `epoch`.
    Hibernate { epoch: u64 },
    /// Test hook: panic inside the handler.
    #[cfg(feature = "fault-injection")]
    Panic,
}

/// What a session actor is started (or restarted) with.
pub struct SessionArgs {
    pub id: SessionId,
    pub services: Services,
    pub events: SessionEvents,
    pub supervisor: ActorRef<SessionSupervisorMsg>,
    /// After a failure: the run that was in flight, and why it failed. It is ended with status
    /// `failed` and this reason once the session has reloaded.
    pub recover: Option<(RunId, String)>,
}

/// The actor; see the module documentation.
pub struct SessionActor;

/// A session's state.
pub struct SessionState {
    id: SessionId,
    services: Services,
    events: SessionEvents,
    supervisor: ActorRef<SessionSupervisorMsg>,
    recover: Option<(RunId, String)>,
    history: History,
    /// Why the session could not be loaded, if it could not.
    load_error: Option<String>,
    /// A commit failed: the memory may be ahead of the store, so reload before the next run.
    needs_reload: bool,
    created_at_ms: u64,
    commits: Commits,
    run: Option<ActiveRun>,
    last_run: Option<RunId>,
    idle_epoch: u64,
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
        Ok(SessionState {
            id: args.id,
            services: args.services,
            events: args.events,
            supervisor: args.supervisor,
            recover: args.recover,
            history: History::default(),
            load_error: None,
            needs_reload: true,
            created_at_ms: now_ms(),
            commits: Commits::default(),
            run: None,
            last_run: None,
            idle_epoch: 0,
        })
    }

    /// Loads the history off the supervisor's path: `spawn` has already returned.
    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.reload(&myself).await;
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
            SessionMsg::StartRun { run_id, spec } => state.start_run(&myself, run_id, spec).await,
            SessionMsg::ModelDone { step, result } => {
                if state.is_current(step) {
                    state.on_model_done(&myself, result).await;
                }
            }
            SessionMsg::ToolsDone { step, outcomes } => {
                if state.is_current(step) {
                    state.on_tools_done(&myself, outcomes).await;
                }
            }
            SessionMsg::StallCheck { step } => {
                if state.is_current(step) {
                    state.check_stall(&myself, step).await;
                }
            }
            SessionMsg::Committed { result } => state.on_committed(&myself, result),
            SessionMsg::Deadline { run_id } => {
                if state.run.as_ref().is_some_and(|r| r.id == run_id) {
                    let limit = state.services.agent.max_duration_secs;
                    state.finish(
                        &myself,
                        RunStatus::Timeout,
                        Some(format!(
                            "the run reached max_duration_secs ({limit}s) and was stopped"
                        )),
                    );
                }
            }
            SessionMsg::FinalCommitTimeout { step } => {
                if state.is_current(step) {
                    state.commits.failed(StoreError::from_cause(
                        "committing the run's last turn",
                        format!("no confirmation within {FINAL_COMMIT_TIMEOUT:?}"),
                    ));
                    state.complete(&myself);
                }
            }
            SessionMsg::Stop { status, reason } => state.finish(&myself, status, Some(reason)),
            SessionMsg::Hibernate { epoch } => {
                if state.run.is_none() && epoch == state.idle_epoch {
                    let request = SessionSupervisorMsg::Hibernate {
                        session_id: state.id.clone(),
                    };
                    if state.supervisor.cast(request).is_err() {
                        tracing::debug!("the session supervisor is gone");
                    }
                }
            }
            #[cfg(feature = "fault-injection")]
            SessionMsg::Panic => panic!("injected fault in session {}", state.id),
        }
        Ok(())
    }
}

impl SessionState {
    fn is_current(&self, step: u64) -> bool {
        self.run.as_ref().is_some_and(|r| r.step == step)
    }

    /// Reloads the session from the store, repairing what a crash left, and ends runs that
    /// were cut off: the one being recovered from a failure is reported to its subscribers.
    async fn reload(&mut self, myself: &ActorRef<SessionMsg>) {
        let recover = self.recover.take();
        let loaded = match self.flush_store().await {
            Ok(()) => {
                recovery::load(
                    &self.services.store,
                    &self.id,
                    recover.as_ref().map(|(run, _)| run),
                )
                .await
            }
            Err(e) => Err(e),
        };
        let Reloaded {
            history: loaded,
            recovered_turns,
        } = match loaded {
            Ok(loaded) => loaded,
            Err(e) => {
                if let Some((run_id, why)) = &recover {
                    self.report_recovered(
                        run_id,
                        &format!("{why}; reloading the session failed: {e}"),
                        &[],
                        now_ms(),
                    );
                }
                return self.load_error = Some(e);
            }
        };
        self.load_error = None;
        self.needs_reload = false;
        self.history = History::load(loaded.messages);
        if let Some(record) = &loaded.record {
            self.created_at_ms = record.created_at_ms;
            self.last_run = record.last_run.clone();
        }
        if let Some((run_id, why)) = &recover {
            // Reported even when the run never reached the store: its subscribers need an end.
            let started_at_ms = loaded
                .unfinished_runs
                .iter()
                .find(|r| r.run_id == *run_id)
                .map_or_else(now_ms, |r| r.started_at_ms);
            self.report_recovered(run_id, why, &recovered_turns, started_at_ms);
        }
        let mut ended = recovery::end_unfinished(loaded.unfinished_runs, recover.as_ref());
        // The repaired messages, and one run record per batch.
        let mut batch = WriteBatch::new(self.id.clone());
        batch.messages = self.history.take_unsubmitted();
        batch.run = ended.pop();
        if !batch.messages.is_empty() || batch.run.is_some() {
            self.submit_batch(myself, batch);
        }
        for run in ended {
            let mut batch = WriteBatch::new(self.id.clone());
            batch.run = Some(run);
            self.submit_batch(myself, batch);
        }
    }

    /// Waits until every batch handed to the store before now is committed, so a reload reads
    /// everything this session (or its failed predecessor) wrote.
    async fn flush_store(&self) -> Result<(), String> {
        let checkpoint = self.services.checkpoint.get().map_err(|e| e.to_string())?;
        match ractor::call_t!(
            checkpoint,
            CheckpointMsg::Flush,
            FINAL_COMMIT_TIMEOUT.as_millis() as u64
        ) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(format!("the store's writer did not answer: {e}")),
        }
    }

    /// Ends a run that failed with its actor: tells its subscribers, then the supervisor.
    fn report_recovered(
        &self,
        run_id: &RunId,
        why: &str,
        turns: &[TurnCheckpoint],
        started_at_ms: u64,
    ) {
        let events = self.events.for_run(self.id.clone(), run_id.clone());
        let cost = match self
            .services
            .store
            .cost_totals(&crate::cost_ledger::run_key(run_id))
        {
            Ok(totals) => Some(totals.unwrap_or_default().cents()),
            Err(e) => {
                tracing::warn!(session = %self.id, "the cost of a failed run is unknown: {e}");
                None
            }
        };
        recovery::report_failed_run(&events, why, turns, cost, started_at_ms);
        self.forget_run(run_id);
        let done = SessionSupervisorMsg::RunFinished {
            session_id: self.id.clone(),
            run_id: run_id.clone(),
        };
        if self.supervisor.cast(done).is_err() {
            tracing::warn!(session = %self.id, "the session supervisor is gone");
        }
    }

    async fn start_run(&mut self, myself: &ActorRef<SessionMsg>, run_id: RunId, spec: RunSpec) {
        self.idle_epoch += 1;
        if self.needs_reload {
            self.reload(myself).await;
        }
        let events = self.events.for_run(self.id.clone(), run_id.clone());
        let system: Arc<str> = system_prompt(&spec.workspace).into();
        let cancel = CancellationToken::new();
        // A commit failure left from between runs belongs to no run; the reload that follows
        // it (needs_reload) has dealt with the store.
        if let Some(stale) = self.commits.take_error() {
            tracing::warn!(session = %self.id, "a commit failed between runs: {stale}");
        }
        let mut run = ActiveRun {
            id: run_id.clone(),
            prompt: spec.prompt.clone(),
            events: events.clone(),
            workspace: spec.workspace,
            system_tokens: crate::tokens::count_text(&system) as u64,
            system,
            call_cancel: cancel.child_token(),
            heartbeat: Heartbeat::new(),
            cancel: cancel.clone(),
            _cancel_on_drop: cancel.drop_guard(),
            started: Instant::now(),
            started_at_ms: now_ms(),
            turns: 0,
            step: next_step(),
            phase: Phase::AwaitingModel,
            usage: Default::default(),
            usage_estimated: false,
            cost_microcents: 0,
            model_calls: 0,
            refusal: None,
            unpriced_alerted: false,
            pending_hints: Vec::new(),
            guardian_watch: None,
            turn_first_seq: self.history.next_seq(),
            turn_input_tokens: 0,
            turn_output_tokens: 0,
            last_text: String::new(),
        };
        if let Some(error) = self.load_error.clone() {
            let ending = Ending {
                status: RunStatus::Failed,
                output: String::new(),
                reason: Some(format!("the session could not be loaded: {error}")),
            };
            events.emit(EventKind::RunStarted);
            run.phase = Phase::Finishing(ending);
            self.run = Some(run);
            return self.complete(myself);
        }
        // A run over budget is refused before its prompt enters the conversation.
        let admitted = oversight::authorize(&self.services, &self.id, &run_id).await;
        self.last_run = Some(run_id.clone());
        if let Err(refusal) = admitted {
            self.run = Some(run);
            events.emit(EventKind::RunStarted);
            return self.refuse(myself, refusal, false);
        }
        self.history.push(Message::user(spec.prompt));
        run.turn_first_seq = self.history.next_seq();
        let record = run.record(None);
        let deadline = self.services.agent.max_duration();
        self.run = Some(run);
        self.submit(myself, None, Some(record));
        events.emit(EventKind::RunStarted);
        myself.send_after(deadline, move || SessionMsg::Deadline { run_id });
        self.begin_turn(myself);
    }

    /// Sends the conversation to the model, unless the last call's receipt refused another.
    fn begin_turn(&mut self, myself: &ActorRef<SessionMsg>) {
        let Some(run) = self.run.as_mut() else { return };
        if let Some(refusal) = run.refusal.take() {
            return self.refuse(myself, refusal, true);
        }
        run.step = next_step();
        // A retried call belongs to the turn its cut predecessor began.
        if !matches!(run.phase, Phase::AwaitingModel) {
            run.turn_first_seq = self.history.next_seq();
        }
        run.phase = Phase::AwaitingModel;
        for hint in std::mem::take(&mut run.pending_hints) {
            run.events.emit(EventKind::GuardianHint {
                message: hint.message.clone(),
                level: hint.level,
            });
            self.history.push(Message::System {
                content: hint.message,
            });
        }
        run.call_cancel = run.cancel.child_token();
        run.heartbeat = Heartbeat::new();
        let step = run.step;
        let me = myself.clone();
        let job = StreamJob {
            request: ChatRequest {
                system: run.system.clone(),
                messages: self.history.snapshot(),
                tools: self.services.registry.specs(),
            },
            events: run.events.clone(),
            cancel: run.call_cancel.clone(),
            heartbeat: run.heartbeat.clone(),
            input_tokens: self.history.total_tokens(),
            on_done: Callback::new(
                move |result| {
                    if me.cast(SessionMsg::ModelDone { step, result }).is_err() {
                        tracing::debug!("a model answer arrived for a session that has stopped");
                    }
                },
                || {
                    Err(ProviderError::StreamCut(
                        "the model call was lost (its actor or task failed)".into(),
                    ))
                },
            ),
        };
        if let Err(e) = self.services.llm.cast(LlmMsg::Stream(job)) {
            return self.fail(myself, e.to_string());
        }
        self.schedule_stall_check(myself, step, None);
    }

    /// Ends the run because the ledger refused its next model call; `announced` when the
    /// refusal was already published (as the call that reached the limit was recorded).
    fn refuse(&mut self, myself: &ActorRef<SessionMsg>, refusal: Refusal, announced: bool) {
        if let (Some(run), false) = (&self.run, announced) {
            announce(&run.events, &refusal);
        }
        self.finish(myself, refusal.status, Some(refusal.reason));
    }

    /// Has the ledger price and record a model call (`usage` as the server reported it, or
    /// `estimated`), and publishes what it found: the call's cost, budget warnings, and a
    /// limit reached (which stops the run before its next call).
    async fn record_call(
        &mut self,
        turn: u32,
        model: &str,
        usage: Usage,
        estimated: bool,
    ) -> Result<(), String> {
        let Some(run) = self.run.as_mut() else {
            return Ok(());
        };
        run.model_calls += 1;
        run.usage.input_tokens += usage.input_tokens;
        run.usage.output_tokens += usage.output_tokens;
        run.usage_estimated |= estimated;
        let report = UsageReport {
            session_id: self.id.clone(),
            run_id: run.id.clone(),
            call: run.model_calls,
            model: model.to_owned(),
            usage,
            estimated,
        };
        let receipt = oversight::record_usage(&self.services, report).await?;
        let Some(run) = self.run.as_mut() else {
            return Ok(());
        };
        run.cost_microcents = receipt.run.cost_microcents;
        run.events.emit(EventKind::ModelUsage {
            turn,
            model: model.to_owned(),
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            estimated,
            cost_cents: receipt.call_microcents as f64 / 1_000_000.0,
        });
        if receipt.price_source == PriceSource::Unknown && !run.unpriced_alerted {
            run.unpriced_alerted = true;
            run.events.emit(EventKind::GuardianBudgetAlert {
                message: format!(
                    "no price is known for model '{model}'; budgets count it at {} / {} cents \
                     per million input / output tokens. Set its price in \
                     [budget.pricing_overrides].",
                    receipt.price.input_per_1m, receipt.price.output_per_1m
                ),
                model: model.to_owned(),
            });
        }
        for warning in &receipt.warnings {
            run.events.emit(warning.warning());
        }
        if let Some(e) = receipt.store_error {
            run.events.emit(EventKind::Error {
                message: format!(
                    "the cost ledger's totals could not be stored ({e}); they are written again \
                     with this call"
                ),
            });
        }
        run.refusal = oversight::admit(receipt.next_call).err();
        if let Some(refusal) = &run.refusal {
            // Said now, even if this call's answer ends the run.
            announce(&run.events, refusal);
        }
        Ok(())
    }

    async fn on_model_done(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        result: Result<ModelReply, ProviderError>,
    ) {
        let reply = match result {
            Ok(reply) => reply,
            Err(e) => return self.fail(myself, format!("the model call failed: {e}")),
        };
        let Some(run) = self.run.as_mut() else { return };
        run.turns += 1;
        run.turn_input_tokens = reply.usage.input_tokens;
        run.turn_output_tokens = reply.usage.output_tokens;
        let turn = run.turns;
        if let Err(reason) = self
            .record_call(turn, &reply.model, reply.usage, reply.usage_estimated)
            .await
        {
            return self.fail(myself, reason);
        }
        let Some(run) = self.run.as_mut() else { return };
        let text = reply.response.text;
        let calls = reply.response.tool_calls;
        if !text.is_empty() {
            run.last_text = text.clone();
        }
        self.history.push(Message::Assistant {
            content: text.clone(),
            tool_calls: calls.clone(),
        });
        if calls.is_empty() {
            return self.finish_with(
                myself,
                Ending {
                    status: RunStatus::Completed,
                    output: text,
                    reason: None,
                },
            );
        }
        let registry = &self.services.registry;
        let side_effects = calls.iter().any(|c| {
            registry
                .get(&c.name)
                .is_some_and(|t| t.tier().has_side_effects())
        });
        if side_effects {
            // The turn that asks for them must survive a crash before anything changes.
            self.submit(myself, None, None);
            if let Some(run) = self.run.as_mut() {
                run.phase = Phase::AwaitingDurability { calls };
            }
            self.advance(myself);
        } else {
            self.dispatch_tools(myself, calls);
        }
    }

    fn dispatch_tools(&mut self, myself: &ActorRef<SessionMsg>, calls: Vec<ToolCall>) {
        let Some(run) = self.run.as_mut() else { return };
        run.step = next_step();
        let step = run.step;
        run.phase = Phase::RunningTools {
            calls: calls.clone(),
        };
        // A completed model answer is progress: the stall clock starts again.
        run.heartbeat.beat();
        let me = myself.clone();
        let lost = calls.clone();
        let batch = ToolBatch {
            calls,
            ctx: ToolContext {
                workspace: run.workspace.clone(),
                session_id: self.id.clone(),
                run_id: run.id.clone(),
                cancel: run.cancel.clone(),
            },
            events: run.events.clone(),
            on_done: Callback::new(
                move |outcomes| {
                    if me.cast(SessionMsg::ToolsDone { step, outcomes }).is_err() {
                        tracing::debug!("tool results arrived for a session that has stopped");
                    }
                },
                move || lost_outcomes(&lost),
            ),
        };
        if let Err(e) = self.services.tools.cast(ToolMsg::Execute(batch)) {
            return self.fail(myself, e.to_string());
        }
        self.schedule_stall_check(myself, step, None);
    }

    async fn on_tools_done(&mut self, myself: &ActorRef<SessionMsg>, outcomes: Vec<ToolOutcome>) {
        let calls = match self.run.as_ref().map(|r| &r.phase) {
            Some(Phase::RunningTools { calls }) => calls.clone(),
            _ => Vec::new(),
        };
        let mut reports = Vec::with_capacity(outcomes.len());
        let tools_called = outcomes.iter().map(|o| o.name.clone()).collect();
        for o in outcomes {
            let arguments = calls
                .iter()
                .find(|c| c.id == o.call_id)
                .map_or("", |c| c.arguments.as_str());
            reports.push(CallReport::new(&o.name, arguments, &o.content, o.is_error));
            self.history.push(Message::ToolResult {
                call_id: o.call_id,
                name: o.name,
                content: o.content,
                is_error: o.is_error,
            });
        }
        let Some(run) = self.run.as_mut() else { return };
        // Every call has its result: a stop from here on must not add another.
        run.phase = Phase::BetweenTurns;
        let run_id = run.id.clone();
        let mut stop = None;
        if self.services.agent.guardian.enabled {
            let report = TurnReport {
                calls: reports,
                context_tokens: self.context_tokens(),
            };
            let review = oversight::review_turn(&self.services, &run_id, report).await;
            stop = self.apply_review(review);
        }
        // The turn and the Guardian's view of it are stored together.
        let checkpoint = self.turn_checkpoint(tools_called);
        self.submit(myself, checkpoint, None);
        if let Some(run) = self.run.as_mut() {
            run.turn_first_seq = self.history.next_seq();
        }
        if let Some((status, reason)) = stop {
            return self.stop_by_guardian(myself, status, reason);
        }
        let Some(run) = self.run.as_ref() else { return };
        let max_turns = self.services.agent.max_turns;
        if run.turns >= max_turns {
            self.finish(
                myself,
                RunStatus::MaxTurns,
                Some(format!("the run reached max_turns ({max_turns})")),
            );
        } else {
            self.begin_turn(myself);
        }
    }

    /// Publishes a review's events and keeps its hint for the next request; returns its stop.
    fn apply_review(&mut self, review: Review) -> Option<(RunStatus, String)> {
        let run = self.run.as_mut()?;
        for event in review.events {
            run.events.emit(event);
        }
        if let Some(hint) = review.hint {
            run.pending_hints.push(hint);
        }
        if review.watch.is_some() {
            run.guardian_watch = review.watch;
        }
        review.stop
    }

    /// Ends the run as the Guardian decided, with a summary of where it stood as its output.
    fn stop_by_guardian(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        status: RunStatus,
        reason: String,
    ) {
        let Some(run) = self.run.as_ref() else { return };
        let mut output = format!("The run was stopped after {} turn(s): {reason}.", run.turns);
        if !run.last_text.is_empty() {
            output.push_str("\n\nThe model's last message:\n");
            output.push_str(&run.last_text);
        }
        if status == RunStatus::Failed {
            run.events.emit(EventKind::Error {
                message: reason.clone(),
            });
        }
        self.finish_with(
            myself,
            Ending {
                status,
                output,
                reason: Some(reason),
            },
        );
    }

    /// The conversation's size as the next request would carry it.
    fn context_tokens(&self) -> u64 {
        let system = self.run.as_ref().map_or(0, |r| r.system_tokens);
        self.history.total_tokens() + system
    }

    /// Looks for a stall of the dispatch made at `step` after the stall timeout, or after
    /// `after`.
    fn schedule_stall_check(
        &self,
        myself: &ActorRef<SessionMsg>,
        step: u64,
        after: Option<Duration>,
    ) {
        let guardian = &self.services.agent.guardian;
        if guardian.enabled {
            let after = after.unwrap_or(Duration::from_secs(guardian.stall_timeout_secs.max(1)));
            myself.send_after(after, move || SessionMsg::StallCheck { step });
        }
    }

    /// The stall timer fired for the dispatch in flight: if nothing moved for the stall
    /// timeout, the Guardian decides (cut and retry a silent model call, hint, or stop).
    async fn check_stall(&mut self, myself: &ActorRef<SessionMsg>, step: u64) {
        let timeout = Duration::from_secs(self.services.agent.guardian.stall_timeout_secs.max(1));
        let Some(run) = self.run.as_ref() else { return };
        let (phase, tools) = match &run.phase {
            Phase::AwaitingModel => (StallPhase::Model, Vec::new()),
            Phase::RunningTools { calls } => (
                StallPhase::Tools,
                calls.iter().map(|c| c.name.clone()).collect(),
            ),
            // Waiting for the store has its own deadline.
            Phase::AwaitingDurability { .. } => {
                return self.schedule_stall_check(myself, step, None)
            }
            Phase::BetweenTurns | Phase::Finishing(_) => return,
        };
        let silent = run.heartbeat.silent_for();
        if silent < timeout {
            return self.schedule_stall_check(myself, step, Some(timeout - silent));
        }
        let run_id = run.id.clone();
        let review =
            oversight::report_stall(&self.services, &self.id, &run_id, phase, silent, tools).await;
        // The run may have moved on while the Guardian was asked.
        if !self.is_current(step) {
            return;
        }
        let Some(review) = review else {
            return self.schedule_stall_check(myself, step, None);
        };
        // The stream may have spoken (or ended) while the Guardian was asked.
        let silent = self.run.as_ref().map(|r| r.heartbeat.silent_for());
        if phase == StallPhase::Model && silent.is_some_and(|s| s < timeout) {
            return self.schedule_stall_check(myself, step, None);
        }
        let retry = review.retry_model_call;
        let stop = self.apply_review(review);
        let changed = self
            .run
            .as_ref()
            .is_some_and(|r| r.guardian_watch.is_some());
        if stop.is_none() && changed {
            self.submit(myself, None, None);
        }
        if let Some((status, reason)) = stop {
            return self.stop_by_guardian(myself, status, reason);
        }
        if retry {
            let Some(run) = &self.run else { return };
            run.call_cancel.cancel();
            // The cut call was paid for: its input at least, estimated.
            let model = self.services.llm_model.clone();
            let model: &str = &model;
            let usage = Usage {
                input_tokens: self.context_tokens(),
                output_tokens: 0,
            };
            let turn = run.turns + 1;
            if let Err(reason) = self.record_call(turn, model, usage, true).await {
                return self.fail(myself, reason);
            }
            return self.begin_turn(myself);
        }
        if let Some(run) = &self.run {
            run.heartbeat.beat();
        }
        self.schedule_stall_check(myself, step, None);
    }

    /// The checkpoint of the turn in progress, if it appended anything.
    fn turn_checkpoint(&self, tools_called: Vec<String>) -> Option<TurnCheckpoint> {
        let run = self.run.as_ref()?;
        let next = self.history.next_seq();
        (next > run.turn_first_seq).then(|| TurnCheckpoint {
            run_id: run.id.clone(),
            turn: run.turns,
            first_seq: run.turn_first_seq,
            last_seq: next - 1,
            tools_called,
            input_tokens: run.turn_input_tokens,
            output_tokens: run.turn_output_tokens,
            context_tokens: self.context_tokens(),
            at_ms: now_ms(),
        })
    }

    fn fail(&mut self, myself: &ActorRef<SessionMsg>, reason: String) {
        if let Some(run) = &self.run {
            run.events.emit(EventKind::Error {
                message: reason.clone(),
            });
        }
        self.finish(myself, RunStatus::Failed, Some(reason));
    }

    fn finish(&mut self, myself: &ActorRef<SessionMsg>, status: RunStatus, reason: Option<String>) {
        let output = self
            .run
            .as_ref()
            .map(|r| r.last_text.clone())
            .unwrap_or_default();
        self.finish_with(
            myself,
            Ending {
                status,
                output,
                reason,
            },
        );
    }

    /// Ends the run: stops what is running, records results for calls that will never finish,
    /// and commits the run's end. The run is reported once that commit is durable.
    fn finish_with(&mut self, myself: &ActorRef<SessionMsg>, ending: Ending) {
        let Some(run) = self.run.as_mut() else { return };
        if matches!(run.phase, Phase::Finishing(_)) {
            return;
        }
        run.cancel.cancel();
        run.step = next_step();
        let step = run.step;
        let phase = std::mem::replace(&mut run.phase, Phase::Finishing(ending.clone()));
        if let Phase::AwaitingDurability { calls } | Phase::RunningTools { calls } = phase {
            for call in calls {
                self.history.push(Message::ToolResult {
                    call_id: call.id,
                    name: call.name,
                    content: format!(
                        "execution_error: the call was stopped because the run ended ({})",
                        ending.status
                    ),
                    is_error: true,
                });
            }
        }
        let checkpoint = self.turn_checkpoint(Vec::new());
        let record = self.run.as_ref().map(|r| r.record(Some(&ending)));
        self.submit(myself, checkpoint, record);
        myself.send_after(FINAL_COMMIT_TIMEOUT, move || {
            SessionMsg::FinalCommitTimeout { step }
        });
        self.advance(myself);
    }

    /// Hands what the session appended, and the given records, to the store.
    fn submit(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        checkpoint: Option<TurnCheckpoint>,
        run: Option<RunRecord>,
    ) {
        let mut batch = WriteBatch::new(self.id.clone());
        batch.messages = self.history.take_unsubmitted();
        batch.checkpoint = checkpoint;
        batch.run = run;
        if let Some(active) = self.run.as_mut() {
            let ended = batch.run.as_ref().is_some_and(|r| r.status.is_some());
            batch.guardian = if ended {
                // The Guardian's view of a finished run is not needed again.
                Some((active.id.clone(), None))
            } else {
                active
                    .guardian_watch
                    .take()
                    .map(|watch| (active.id.clone(), Some(watch)))
            };
        }
        self.submit_batch(myself, batch);
    }

    fn submit_batch(&mut self, myself: &ActorRef<SessionMsg>, mut batch: WriteBatch) {
        batch.session = Some(SessionRecord {
            session_id: self.id.clone(),
            created_at_ms: self.created_at_ms,
            updated_at_ms: now_ms(),
            message_count: self.history.next_seq(),
            last_run: self.last_run.clone(),
        });
        self.commits
            .submitted(batch.checkpoint.as_ref().map(|c| c.turn));
        let me = myself.clone();
        let notify = Callback::new(
            move |result| {
                if me.cast(SessionMsg::Committed { result }).is_err() {
                    tracing::debug!("a commit was confirmed to a session that has stopped");
                }
            },
            || Err(crate::checkpoint::writer_gone()),
        );
        if let Err(e) = self.services.checkpoint.cast(CheckpointMsg::Append {
            batch: Box::new(batch),
            notify,
        }) {
            // The undelivered message dropped its callback, which reports the failure.
            tracing::error!(session = %self.id, "handing a turn to the store failed: {e}");
        }
    }

    fn on_committed(&mut self, myself: &ActorRef<SessionMsg>, result: Result<(), StoreError>) {
        let confirmation = self.commits.confirmed(result);
        if let Some(run) = &self.run {
            for turn in confirmation.durable_turns {
                run.events.emit(EventKind::CheckpointSaved { turn });
            }
        }
        if let Some(e) = confirmation.failure {
            tracing::error!(session = %self.id, "commit failed: {e}");
            self.needs_reload = true;
            // Ending an already-ending run is a no-op; any failure ends a run going on.
            self.fail(myself, format!("the turn could not be stored: {e}"));
        }
        self.advance(myself);
    }

    /// Moves on from a wait for durability, once everything submitted is durable.
    fn advance(&mut self, myself: &ActorRef<SessionMsg>) {
        if !self.commits.all_confirmed() {
            return;
        }
        let Some(run) = self.run.as_mut() else { return };
        match &mut run.phase {
            Phase::AwaitingDurability { calls } => {
                let calls = std::mem::take(calls);
                self.dispatch_tools(myself, calls);
            }
            Phase::Finishing(_) => self.complete(myself),
            _ => {}
        }
    }

    /// Reports the run's end: everything it wrote is durable (or could not be).
    fn complete(&mut self, myself: &ActorRef<SessionMsg>) {
        // Only a run that is finishing completes; it is taken out only then.
        let Some(Phase::Finishing(ending)) = self.run.as_ref().map(|r| &r.phase) else {
            return;
        };
        let mut ending = ending.clone();
        let Some(run) = self.run.take() else { return };
        if let Some(e) = self.commits.take_error() {
            ending.status = RunStatus::Failed;
            ending.reason = Some(format!("the run's turns could not be stored: {e}"));
        }
        // The supervisor hears of the end before any subscriber does: a caller that starts the
        // next run on this session as soon as it sees RunComplete is queued behind this notice.
        if self
            .supervisor
            .cast(SessionSupervisorMsg::RunFinished {
                session_id: self.id.clone(),
                run_id: run.id.clone(),
            })
            .is_err()
        {
            tracing::warn!(session = %self.id, "the session supervisor is gone; a finished run was not reported to it");
        }
        self.forget_run(&run.id);
        report_end(&run.events, &ending, &run);
        self.schedule_hibernation(myself);
    }

    /// Tells the Guardian and the ledger a run is over, so they drop what they keep of it.
    fn forget_run(&self, run_id: &RunId) {
        let ended = GuardianMsg::RunEnded {
            run_id: run_id.clone(),
        };
        if self.services.guardian.cast(ended).is_err() {
            tracing::debug!("the Guardian is down; a restarted one holds nothing of the run");
        }
        let ended = crate::cost_ledger::CostLedgerMsg::RunEnded {
            session_id: self.id.clone(),
            run_id: run_id.clone(),
        };
        if self.services.ledger.cast(ended).is_err() {
            tracing::debug!("the cost ledger is down; a restarted one holds nothing of the run");
        }
    }

    fn schedule_hibernation(&mut self, myself: &ActorRef<SessionMsg>) {
        self.idle_epoch += 1;
        let epoch = self.idle_epoch;
        let idle = Duration::from_secs(self.services.agent.session_idle_secs);
        myself.send_after(idle, move || SessionMsg::Hibernate { epoch });
    }
}

/// Publishes why the ledger refuses further calls.
fn announce(events: &RunEvents, refusal: &Refusal) {
    match &refusal.limit {
        Some(limit) => events.emit(limit.exceeded()),
        None => events.emit(EventKind::Error {
            message: refusal.reason.clone(),
        }),
    }
}

fn report_end(events: &RunEvents, ending: &Ending, run: &ActiveRun) {
    events.emit(EventKind::RunComplete {
        status: ending.status,
        output: ending.output.clone(),
        turns: run.turns,
        input_tokens: run.usage.input_tokens,
        output_tokens: run.usage.output_tokens,
        cost_cents: Some(run.cost_microcents as f64 / 1_000_000.0),
        duration_ms: run.started.elapsed().as_millis() as u64,
        reason: ending.reason.clone(),
    });
}
