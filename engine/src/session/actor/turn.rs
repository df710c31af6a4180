//! One turn of the loop: the model is asked, its answer recorded and appended, the calls it
//! asked for run (once the turn is durable, if any has side effects), their results appended,
//! the Guardian's review taken, and the turn stored; then the next model call.

use super::asking::ask;
use super::spending::Bill;
use super::{next_step, SessionMsg, SessionState};
use crate::callback::Callback;
use crate::event::{EventKind, RunStatus};
use crate::guardian::{CallReport, Review, TurnReport};
use crate::llm_stream::{Heartbeat, LlmMsg, ModelAnswer, ModelReply, Purpose, StreamJob};
use crate::message::{Message, ToolCall};
use crate::provider::FinishReason;
use crate::provider::{ChatRequest, ProviderError};
use crate::session::oversight;
use crate::session::run::{AfterBilling, AfterCompaction, Ending, Phase, TurnEnd};
use crate::store::{now_ms, TurnCheckpoint};
use crate::tool_executor::{lost_outcomes, ToolBatch, ToolMsg, ToolOutcome};
use ractor::ActorRef;

impl SessionState {
    /// Sends the conversation to the model, unless the last call's receipt refused another,
    /// the run was interrupted, or it has used its `max_turns`.
    pub(super) fn begin_turn(&mut self, myself: &ActorRef<SessionMsg>) {
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
        let counted_input = self.counted_request_tokens();
        let asked_with = self.history.mark();
        let Some(run) = self.run.as_mut() else { return };
        run.asked_with = asked_with;
        let job = StreamJob {
            request,
            events: run.events.clone(),
            purpose: Purpose::Turn,
            counted_input,
            encoded: run.encoded.clone(),
            cancel: run.call_cancel.clone(),
            heartbeat: run.heartbeat.clone(),
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

    pub(super) fn on_model_done(&mut self, myself: &ActorRef<SessionMsg>, answer: ModelAnswer) {
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
        // Counted only when there is a cut call to bill: counting is not free.
        let cut_input = match answer.cut_calls.is_empty() {
            true => 0,
            false => self.request_tokens(),
        };
        let mut bills = Bill::cut_calls(turn, &answer.cut_calls, cut_input);
        if let Ok(reply) = &answer.result {
            bills.push(Bill::of(turn, reply));
        }
        self.bill_then(myself, bills, AfterBilling::Answer(answer.result));
    }

    /// The turn's model answer, once recorded with the ledger: appended, then the run ends or
    /// its calls run.
    pub(super) fn use_answer(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        result: Result<ModelReply, ProviderError>,
    ) {
        let reply = match result {
            Ok(reply) => reply,
            Err(ProviderError::ContextOverflow(why)) => {
                return self.prune_for_overflow(myself, why)
            }
            Err(e) => return self.fail(myself, format!("the model call failed: {e}")),
        };
        let Some(run) = self.run.as_mut() else { return };
        run.pruned_for_overflow = false;
        run.resent_lost_call = false;
        run.turns += 1;
        run.turn_input_tokens = reply.usage.input_tokens;
        run.turn_output_tokens = reply.usage.output_tokens;
        let asked_with = run.asked_with;
        if !reply.usage_estimated {
            let system = self.system_tokens();
            self.history
                .measure(asked_with, reply.usage.input_tokens, system);
        }
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

    pub(super) fn dispatch_tools(&mut self, myself: &ActorRef<SessionMsg>, calls: Vec<ToolCall>) {
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

    pub(super) fn on_tools_done(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        outcomes: Vec<ToolOutcome>,
    ) {
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
            return self.after_pending_calls(myself, prompt);
        }
        let turn = TurnEnd {
            reports,
            tools_called,
        };
        self.count_near_limits();
        // Asked before any pruning, so a turn that jumps past both thresholds is not skipped.
        self.prompt_memory_flush();
        if let Some(cut) = self.cut_needed() {
            // The turn is stored before the conversation is compacted.
            let checkpoint = self.turn_checkpoint(turn.tools_called.clone());
            self.submit(myself, checkpoint, None);
            if let Some(run) = self.run.as_mut() {
                run.turn_first_seq = self.history.next_seq();
            }
            return self.compact_then(myself, cut, AfterCompaction::EndTurn(turn));
        }
        self.end_turn(myself, turn);
    }

    /// After a turn (and any compaction): the Guardian's review (asked off the mailbox), then
    /// [`Self::on_reviewed`].
    pub(super) fn end_turn(&mut self, myself: &ActorRef<SessionMsg>, turn: TurnEnd) {
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
        // A recovered run counts its stored turns: only a run's very first turn is `first`.
        let first = run.turns == 1;
        let review = oversight::review_turn(
            self.services.guardian.clone(),
            run.id.clone(),
            report,
            first,
        );
        ask(myself, review, move |review| SessionMsg::Reviewed {
            step,
            review,
        });
    }

    /// The Guardian's review of the turn is back: applied, and the turn stored with it.
    pub(super) fn on_reviewed(&mut self, myself: &ActorRef<SessionMsg>, review: Review) {
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
    pub(super) fn store_turn(
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
    pub(super) fn turn_checkpoint(&self, tools_called: Vec<String>) -> Option<TurnCheckpoint> {
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
