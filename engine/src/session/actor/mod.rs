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
//!
//! The loop's steps are in this file; [`starting`] holds how a run begins, [`spending`] the
//! ledger's part, [`guardian`] the Guardian's, [`context`] how the conversation keeps within
//! its budget, [`pausing`] how an interrupt pauses it, [`ending`] how a run ends and is
//! reported, [`reload`] how a session comes back.

mod asking;
mod context;
mod ending;
mod guardian;
mod guarding;
mod judging;
mod pausing;
mod reload;
mod spending;
mod starting;

use super::commits::Commits;
use super::history::History;
use super::notice::{NoticeRef, SessionNotice};
use super::oversight;
use super::run::{ActiveRun, AfterBilling, AfterCompaction, Ending, Phase, TurnEnd};
use super::{RunSpec, Services};
use crate::callback::Callback;
use crate::checkpoint::CheckpointMsg;
use crate::cost_ledger::Receipt;
use crate::event::StallPhase;
use crate::event::{EventKind, RunStatus, SessionEvents};
use crate::guardian::{CallReport, Review, TurnReport};
use crate::ids::{RunId, SessionId};
use crate::llm_stream::{Heartbeat, LlmMsg, ModelAnswer, ModelReply, StreamJob};
use crate::message::{Message, ToolCall};
use crate::provider::FinishReason;
use crate::provider::{ChatRequest, ProviderError};
use crate::store::{
    now_ms, RunRecord, SessionRecord, StoreError, TurnCheckpoint, Write, WriteBatch,
};
use crate::tool_executor::{lost_outcomes, ToolBatch, ToolMsg, ToolOutcome};
use asking::ask;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use spending::Bill;
use std::time::Duration;

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
pub(super) enum SessionMsg {
    /// Start a run (the supervisor has checked that none is in flight).
    StartRun { run_id: RunId, spec: RunSpec },
    /// The model answered (or failed) the request sent at `step`.
    ModelDone { step: u64, answer: ModelAnswer },
    /// The calls dispatched at `step` finished.
    ToolsDone {
        step: u64,
        outcomes: Vec<ToolOutcome>,
    },
    /// The ledger recorded the calls billed at `step` (a receipt each), or could not.
    Billed {
        step: u64,
        receipts: Result<Vec<(Bill, Receipt)>, String>,
    },
    /// The Guardian reviewed the turn that ended at `step`.
    Reviewed { step: u64, review: Review },
    /// The Guardian answered (or not) the stall reported at `step`.
    StallReviewed {
        step: u64,
        phase: StallPhase,
        review: Option<Review>,
    },
    /// The oldest batch not yet confirmed was committed (or failed).
    Committed { result: Result<(), StoreError> },
    /// The summary asked for at `step` came back (or failed).
    SummaryDone { step: u64, answer: ModelAnswer },
    /// The Judge's evaluation asked for at `step` is back.
    Judged {
        step: u64,
        evaluated: crate::judge::Evaluated,
    },
    /// Time to look for a stall of the dispatch made at `step`.
    StallCheck { step: u64 },
    /// The run `run_id` reached its time limit, as `why` says.
    Deadline { run_id: RunId, why: String },
    /// The final commit of the run ending at `step` took too long.
    FinalCommitTimeout { step: u64 },
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
    services: Services,
    events: SessionEvents,
    supervisor: NoticeRef,
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
    /// The calls a paused run left pending, not yet taken up by another run.
    paused_calls: Vec<crate::ids::CallId>,
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
            paused_calls: Vec::new(),
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
            SessionMsg::ModelDone { step, answer } => {
                if state.is_current(step) {
                    state.on_model_done(&myself, answer);
                }
            }
            SessionMsg::ToolsDone { step, outcomes } => {
                if state.is_current(step) {
                    state.on_tools_done(&myself, outcomes).await;
                }
            }
            SessionMsg::Billed { step, receipts } => {
                if state.is_current(step) {
                    state.on_billed(&myself, receipts).await;
                }
            }
            SessionMsg::Reviewed { step, review } => {
                if state.is_current(step) {
                    state.on_reviewed(&myself, review);
                }
            }
            SessionMsg::StallReviewed {
                step,
                phase,
                review,
            } => {
                if state.is_current(step) {
                    state.on_stall_reviewed(&myself, step, phase, review);
                }
            }
            SessionMsg::SummaryDone { step, answer } => {
                if state.is_current(step) {
                    state.on_summary_done(&myself, answer);
                }
            }
            SessionMsg::Judged { step, evaluated } => {
                if state.is_current(step) {
                    state.on_judged(&myself, evaluated);
                }
            }
            SessionMsg::StallCheck { step } => {
                if state.is_current(step) {
                    state.check_stall(&myself, step);
                }
            }
            SessionMsg::Committed { result } => state.on_committed(&myself, result),
            SessionMsg::Deadline { run_id, why } => {
                if state.run.as_ref().is_some_and(|r| r.id == run_id) {
                    state.finish(&myself, RunStatus::Timeout, Some(why));
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
            SessionMsg::Interrupt { reason, now } => state.interrupt(&myself, reason, now),
            SessionMsg::Hibernate { epoch } => {
                if state.run.is_none() && epoch == state.idle_epoch {
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
    fn is_current(&self, step: u64) -> bool {
        self.run.as_ref().is_some_and(|r| r.step == step)
    }

    /// Sends the conversation to the model, unless the last call's receipt refused another,
    /// the run was interrupted, or it has used its `max_turns`.
    fn begin_turn(&mut self, myself: &ActorRef<SessionMsg>) {
        let Some(run) = self.run.as_mut() else { return };
        if let Some(refusal) = run.refusal.take() {
            return self.refuse(myself, refusal, true);
        }
        if self.pause_if_interrupted(myself) || self.stop_at_max_turns(myself) {
            return;
        }
        let Some(run) = self.run.as_mut() else { return };
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
        let request = ChatRequest {
            system: run.system.clone(),
            messages: self.history.snapshot(),
            tools: self.services.registry.specs(),
        };
        let Some(request) = self.guard_request(myself, request) else {
            return;
        };
        let Some(run) = self.run.as_mut() else { return };
        let job = StreamJob {
            request,
            events: run.events.clone(),
            publish_text: true,
            cancel: run.call_cancel.clone(),
            heartbeat: run.heartbeat.clone(),
            input_tokens: self.request_tokens(),
            on_done: Callback::new(
                move |answer| {
                    if me.cast(SessionMsg::ModelDone { step, answer }).is_err() {
                        tracing::debug!("a model answer arrived for a session that has stopped");
                    }
                },
                || ModelAnswer::lost("the model call"),
            ),
        };
        // A model actor being restarted gets the job once it is back.
        self.services.llm.send(LlmMsg::Stream(job));
        self.schedule_stall_check(myself, step, None);
    }

    fn on_model_done(&mut self, myself: &ActorRef<SessionMsg>, answer: ModelAnswer) {
        let Some(run) = self.run.as_mut() else { return };
        if answer.lost && !run.resent_lost_call {
            // The model actor failed with the request in its mailbox: nothing was asked or
            // billed, so it is asked once more, of its next incarnation.
            run.resent_lost_call = true;
            tracing::warn!(session = %self.id, "a model call was lost with its actor; asking again");
            return self.begin_turn(myself);
        }
        // Every attempt the server may have billed is recorded before the answer is used.
        let turn = run.turns + 1;
        let mut bills = Bill::cut_calls(turn, &answer.cut_calls, self.request_tokens());
        if let Ok(reply) = &answer.result {
            bills.push(Bill::of(turn, reply));
        }
        self.bill_then(myself, bills, AfterBilling::Answer(answer.result));
    }

    /// The turn's model answer, once recorded with the ledger: appended, then the run ends or
    /// its calls run.
    async fn use_answer(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        result: Result<ModelReply, ProviderError>,
    ) {
        let reply = match result {
            Ok(reply) => reply,
            Err(ProviderError::ContextOverflow(why)) => {
                return self.prune_for_overflow(myself, why).await
            }
            Err(e) => return self.fail(myself, format!("the model call failed: {e}")),
        };
        let Some(run) = self.run.as_mut() else { return };
        run.pruned_for_overflow = false;
        run.resent_lost_call = false;
        run.turns += 1;
        run.turn_input_tokens = reply.usage.input_tokens;
        run.turn_output_tokens = reply.usage.output_tokens;
        if !self.guard_answer(myself, &reply.response) {
            return;
        }
        let Some(run) = self.run.as_mut() else { return };
        let text = reply.response.text;
        let calls = reply.response.tool_calls;
        run.answer_cut = reply.response.finish == Some(FinishReason::Length);
        if run.answer_cut {
            run.events.emit(truncation_event(&reply.model, &calls));
        }
        if !text.is_empty() {
            run.last_text = text.clone();
        }
        let answer = Message::Assistant {
            content: text.clone(),
            tool_calls: calls.clone(),
        };
        run.observe(&answer);
        self.history.push(answer);
        if calls.is_empty() {
            if run.goal.is_some() {
                return self.judge(myself, text, false);
            }
            return self.finish_with(
                myself,
                Ending {
                    status: RunStatus::Completed,
                    output: text,
                    reason: None,
                },
            );
        }
        // A run that pauses here leaves the calls it was given pending, for the next run.
        if self.pause_if_interrupted(myself) || self.stop_at_max_turns(myself) {
            return;
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
            ctx: run.tool_context(&self.id),
            events: run.events.clone(),
            cut_at_output_limit: run.answer_cut,
            on_message: run.on_message.clone(),
            on_done: Callback::new(
                move |outcomes| {
                    if me.cast(SessionMsg::ToolsDone { step, outcomes }).is_err() {
                        tracing::debug!("tool results arrived for a session that has stopped");
                    }
                },
                move || lost_outcomes(&lost),
            ),
        };
        self.services.tools.send(ToolMsg::Execute(Box::new(batch)));
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
            self.history.push(Message::from(o));
        }
        let Some(run) = self.run.as_mut() else { return };
        // Every call that ran has its result: a stop from here on must not add another.
        run.phase = Phase::BetweenTurns;
        if self.pause_if_interrupted(myself) {
            return;
        }
        if let Some(prompt) = self.run.as_mut().and_then(|r| r.held_prompt.take()) {
            // The calls a paused run left are done: the run goes on as if it had just begun.
            return self.after_pending_calls(myself, prompt).await;
        }
        let turn = TurnEnd {
            reports,
            tools_called,
        };
        // Asked before any pruning, so a turn that jumps past both thresholds is not skipped.
        self.prompt_memory_flush();
        if let Some(cut) = self.cut_needed() {
            // The turn is stored before the conversation is compacted.
            let checkpoint = self.turn_checkpoint(turn.tools_called.clone());
            self.submit(myself, checkpoint, None);
            if let Some(run) = self.run.as_mut() {
                run.turn_first_seq = self.history.next_seq();
            }
            return self
                .compact_then(myself, cut, AfterCompaction::EndTurn(turn))
                .await;
        }
        self.end_turn(myself, turn);
    }

    /// After a turn (and any compaction): the Guardian's review (asked off the mailbox), then
    /// [`Self::on_reviewed`].
    fn end_turn(&mut self, myself: &ActorRef<SessionMsg>, turn: TurnEnd) {
        if !self.services.agent.guardian.enabled {
            return self.store_turn(myself, turn.tools_called, None);
        }
        let context_tokens = self.context_tokens();
        let Some(run) = self.run.as_mut() else { return };
        run.step = next_step();
        run.phase = Phase::Reviewing {
            tools_called: turn.tools_called,
        };
        let step = run.step;
        let report = TurnReport {
            calls: turn.reports,
            context_tokens,
        };
        let review = oversight::review_turn(self.services.guardian.clone(), run.id.clone(), report);
        ask(myself, review, move |review| SessionMsg::Reviewed {
            step,
            review,
        });
    }

    /// The Guardian's review of the turn is back: applied, and the turn stored with it.
    fn on_reviewed(&mut self, myself: &ActorRef<SessionMsg>, review: Review) {
        let Some(run) = self.run.as_mut() else { return };
        let Phase::Reviewing { tools_called } =
            std::mem::replace(&mut run.phase, Phase::BetweenTurns)
        else {
            return;
        };
        let stop = self.apply_review(review);
        self.store_turn(myself, tools_called, stop);
    }

    /// Stores the finished turn (with the Guardian's view of it), then makes the next model
    /// call, or ends the run as the Guardian said.
    fn store_turn(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        tools_called: Vec<String>,
        stop: Option<(RunStatus, String)>,
    ) {
        // The turn and the Guardian's view of it are stored together.
        let checkpoint = self.turn_checkpoint(tools_called);
        self.submit(myself, checkpoint, None);
        if let Some(run) = self.run.as_mut() {
            run.turn_first_seq = self.history.next_seq();
        }
        if let Some((status, reason)) = stop {
            return self.stop_by_guardian(myself, status, reason);
        }
        if self.periodic_judging_due() {
            let progress = self
                .run
                .as_ref()
                .map(|r| r.last_text.clone())
                .unwrap_or_default();
            return self.judge(myself, progress, true);
        }
        self.begin_turn(myself);
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

    /// Hands what the session appended, and the given records, to the store.
    fn submit(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        checkpoint: Option<TurnCheckpoint>,
        run: Option<RunRecord>,
    ) {
        let mut batch = WriteBatch::new(self.id.clone());
        let messages = self.history.take_unsubmitted();
        let compaction = self.history.take_compaction();
        // After a failed commit the store refuses messages past what it lost, and the session
        // reloads from it before its next run: only the records go.
        if !self.needs_reload {
            batch
                .writes
                .extend(messages.into_iter().map(Write::Message));
            batch.writes.extend(checkpoint.map(Write::Checkpoint));
            batch.writes.extend(compaction.map(Write::Compaction));
        }
        let ended = run.as_ref().is_some_and(|r| r.status.is_some());
        batch.writes.extend(run.map(Write::Run));
        if let Some(active) = self.run.as_mut() {
            let verdicts = std::mem::take(&mut active.judging.unstored);
            batch
                .writes
                .extend(verdicts.into_iter().map(Write::Verdict));
            let run_id = active.id.clone();
            if ended {
                // The Guardian's view of a finished run is not needed again.
                batch.push(Write::Watch {
                    run_id,
                    watch: None,
                });
            } else if let Some(watch) = active.guardian_watch.take() {
                batch.push(Write::Watch {
                    run_id,
                    watch: Some(watch),
                });
            }
        }
        self.submit_batch(myself, batch);
    }

    fn submit_batch(&mut self, myself: &ActorRef<SessionMsg>, mut batch: WriteBatch) {
        batch.push(Write::Session(SessionRecord {
            session_id: self.id.clone(),
            created_at_ms: self.created_at_ms,
            updated_at_ms: now_ms(),
            message_count: self.history.next_seq(),
            last_run: self.last_run.clone(),
            paused_calls: self.paused_calls.clone(),
        }));
        self.commits.submitted(batch.checkpoint().map(|c| c.turn));
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

    fn schedule_hibernation(&mut self, myself: &ActorRef<SessionMsg>) {
        self.idle_epoch += 1;
        let epoch = self.idle_epoch;
        let idle = Duration::from_secs(self.services.agent.session_idle_secs);
        myself.send_after(idle, move || SessionMsg::Hibernate { epoch });
    }
}

/// The event of an answer that stopped at the output limit, naming the calls it cut off.
fn truncation_event(model: &str, calls: &[ToolCall]) -> EventKind {
    let cut_calls: Vec<_> = calls
        .iter()
        .filter(|c| !crate::provider::replay::is_object(&c.arguments))
        .map(|c| c.id.clone())
        .collect();
    let message = if !cut_calls.is_empty() {
        format!(
            "{model} stopped at its output limit (max_output_tokens) in the middle of a tool \
             call: {} call(s) cut off will not run, and the model is told to make them smaller",
            cut_calls.len()
        )
    } else if calls.is_empty() {
        format!("{model} stopped at its output limit (max_output_tokens): the answer is incomplete")
    } else {
        format!("{model} stopped at its output limit (max_output_tokens) after its tool calls")
    };
    EventKind::OutputTruncated {
        message,
        model: model.to_owned(),
        cut_calls,
    }
}
