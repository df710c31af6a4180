//! Keeping the conversation within its budget: when the context would reach the Guardian's hard
//! limit, the oldest messages leave the window (the store keeps them), summarized first by the
//! model when `enable_summarization` is on. A summary that fails still lets the pruning happen:
//! a session never becomes unusable because its history grew.

use super::spending::Bill;
use super::{next_step, SessionMsg, SessionState};
use crate::callback::Callback;
use crate::context::{prune_to_budget, summary, Cut};
use crate::event::EventKind;
use crate::llm_stream::{Heartbeat, LlmMsg, ModelAnswer, ModelReply, Purpose, StreamJob};
use crate::provider::ProviderError;
use crate::session::run::{AfterBilling, AfterCompaction, Phase};
use crate::tokens::Size;
use ractor::ActorRef;

/// After pruning, the conversation is brought down to this share of `max_context_tokens`,
/// leaving room to grow before the next pruning.
const PRUNE_TARGET_PERCENT: u64 = 60;
/// At this share of `max_context_tokens` the model is asked to save memories.
const FLUSH_PERCENT: u64 = 85;
/// The tool the memory flush asks the model to use.
const MEMORY_WRITE: &str = "memory_write";
/// Room kept for the summary that replaces what is pruned, as a share of `max_context_tokens`.
const SUMMARY_RESERVE_PERCENT: u64 = 5;

impl SessionState {
    /// The smallest context at which its size decides something: the memory flush, the
    /// Guardian's warning and its hard limit (where pruning starts).
    fn decision_floor(&self) -> u64 {
        let agent = &self.services.agent;
        let guardian = &agent.guardian;
        let percent = u64::from(guardian.token_budget_soft.min(guardian.token_budget_hard))
            .min(FLUSH_PERCENT);
        agent.max_context_tokens.saturating_mul(percent) / 100
    }

    /// Counts the context exactly once its bound reaches [`Self::decision_floor`], so that
    /// every decision is made on counts; from half of it the tokenizer is built in the
    /// background, so that the count rarely waits for it.
    pub(super) fn count_near_limits(&mut self) {
        let floor = self.decision_floor();
        let bound = self.context_tokens();
        if self.is_counted() || bound < floor / 2 {
            return;
        }
        if bound < floor {
            return crate::tokens::warm_up();
        }
        self.count_exactly();
    }

    /// Whether the context's sizes are all counted, none only bounded.
    pub(super) fn is_counted(&self) -> bool {
        self.history.is_counted()
            && self
                .run
                .as_ref()
                .is_none_or(|r| r.system_size.counted().is_some())
    }

    /// Counts every size only bounded so far: the conversation's and the system prompt's.
    pub(super) fn count_exactly(&mut self) {
        if self.is_counted() {
            return;
        }
        crate::tokens::blocking(|| {
            self.history.count_exactly();
            if let Some(run) = self.run.as_mut() {
                run.system_size = Size::Counted(crate::tokens::count_text(&run.system));
            }
        })
    }

    /// The cut to make now, if the context has reached the point where the Guardian would stop
    /// the run (`token_budget_hard` of `max_context_tokens`). The check is O(1).
    pub(super) fn cut_needed(&self) -> Option<Cut> {
        let agent = &self.services.agent;
        let max = agent.max_context_tokens;
        let trigger = max.saturating_mul(u64::from(agent.guardian.token_budget_hard)) / 100;
        if self.context_tokens() < trigger {
            return None;
        }
        self.cut_down_to(max.saturating_mul(PRUNE_TARGET_PERCENT) / 100)
    }

    /// The cut that brings the context (system prompt included) down to `target` tokens, if
    /// one can.
    pub(super) fn cut_down_to(&self, target: u64) -> Option<Cut> {
        let agent = &self.services.agent;
        let max = agent.max_context_tokens;
        let system = self
            .run
            .as_ref()
            .map_or(0, |r| r.system_size.tokens().into());
        let target = target.saturating_sub(system);
        let reserve = if agent.enable_summarization {
            max.saturating_mul(SUMMARY_RESERVE_PERCENT) / 100
        } else {
            0
        };
        prune_to_budget(
            &self.history.snapshot(),
            self.history.token_counts(),
            self.history.total_tokens(),
            target,
            reserve,
            agent.min_tail,
        )
    }

    /// Once the context reaches [`FLUSH_PERCENT`] of its budget (and once more after each
    /// pruning), asks the model to save what must outlive the oldest messages, when it has a
    /// `memory_write` tool to do so.
    pub(super) fn prompt_memory_flush(&mut self) {
        let max = self.services.agent.max_context_tokens;
        let context = self.context_tokens();
        let has_tool = self.services.registry.get(MEMORY_WRITE).is_some();
        let Some(run) = self.run.as_mut() else { return };
        if run.flush_prompted || !has_tool || context < max.saturating_mul(FLUSH_PERCENT) / 100 {
            return;
        }
        run.flush_prompted = true;
        let percent = context.saturating_mul(100) / max.max(1);
        let message = format!(
            "[Memory] The conversation is at {percent}% of its context budget; its oldest \
             messages will soon leave the context. If anything in them must be remembered \
             beyond this conversation, save it now with {MEMORY_WRITE} (one fact per call), \
             then go on with the task."
        );
        run.events.emit(EventKind::MemoryFlush {
            message: message.clone(),
            context_tokens: context,
        });
        self.history
            .push(crate::message::Message::System { content: message });
    }

    /// Whether pruned messages are summarized first: when configured, and when the budget
    /// still allows a model call.
    fn wants_summary(&self) -> bool {
        self.services.agent.enable_summarization
            && self.run.as_ref().is_some_and(|r| r.refusal.is_none())
    }

    /// The model found the request too large for its context window: the conversation is
    /// pruned to [`PRUNE_TARGET_PERCENT`] of its size (or of the budget, if smaller) and the
    /// call made again, once per turn.
    pub(super) fn prune_for_overflow(&mut self, myself: &ActorRef<SessionMsg>, why: String) {
        // The model's window is smaller than the budget said: shrink from where it is now,
        // counted.
        self.count_exactly();
        let Some(run) = self.run.as_mut() else { return };
        let first = !std::mem::replace(&mut run.pruned_for_overflow, true);
        let max = self.services.agent.max_context_tokens;
        let target = (max.min(self.context_tokens())).saturating_mul(PRUNE_TARGET_PERCENT) / 100;
        match self.cut_down_to(target).filter(|_| first) {
            Some(cut) => {
                if let Some(run) = &self.run {
                    run.events.emit(crate::event::EventKind::Warning {
                        message: format!(
                            "the model rejected the request as too large for its context \
                             window ({why}); the oldest messages leave the context and the call \
                             is made again. Lower [agent] max_context_tokens to match the model."
                        ),
                    });
                }
                self.compact_then(myself, cut, AfterCompaction::CallModel)
            }
            None => self.fail(
                myself,
                format!(
                    "the request is too large for the model's context window and pruning cannot \
                     make it smaller ({why}); lower [agent] max_context_tokens or min_tail"
                ),
            ),
        }
    }

    /// Compacts the conversation by `cut`, summarized first when [`Self::wants_summary`], then
    /// goes on as `then` says.
    pub(super) fn compact_then(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        cut: Cut,
        then: AfterCompaction,
    ) {
        if self.wants_summary() {
            return self.summarize(myself, cut, then);
        }
        self.compact(cut, None);
        self.go_on(myself, then);
    }

    fn go_on(&mut self, myself: &ActorRef<SessionMsg>, then: AfterCompaction) {
        match then {
            AfterCompaction::EndTurn(turn) => self.end_turn(myself, turn),
            AfterCompaction::CallModel => self.begin_turn(myself),
        }
    }

    /// Asks the model for a summary of the messages `cut` drops; the run goes on when it is
    /// back.
    fn summarize(&mut self, myself: &ActorRef<SessionMsg>, cut: Cut, then: AfterCompaction) {
        let dropped = self.history.snapshot();
        let Some(run) = self.run.as_mut() else { return };
        run.step = next_step();
        run.phase = Phase::Summarizing { cut, then };
        run.call_cancel = run.cancel.child_token();
        run.heartbeat = Heartbeat::new();
        let step = run.step;
        let me = myself.clone();
        let job = StreamJob {
            request: summary::request(&dropped[..cut.drop]),
            events: run.events.clone(),
            purpose: Purpose::Summary { messages: cut.drop },
            counted_input: None,
            encoded: Default::default(),
            cancel: run.call_cancel.clone(),
            heartbeat: run.heartbeat.clone(),
            on_done: Callback::new(
                move |answer| {
                    if me.cast(SessionMsg::SummaryDone { step, answer }).is_err() {
                        tracing::debug!("a summary arrived for a session that has stopped");
                    }
                },
                || ModelAnswer::lost("the summary call"),
            ),
        };
        // Undelivered, the job answers its callback with the failure: pruning goes on without.
        self.services.llm.send(LlmMsg::Stream(job));
        self.schedule_stall_check(myself, step, None);
    }

    /// The summary is back, or failed: once its calls are recorded, the conversation is
    /// pruned either way ([`Self::summarized`]).
    pub(super) fn on_summary_done(&mut self, myself: &ActorRef<SessionMsg>, answer: ModelAnswer) {
        let Some(run) = self.run.as_mut() else { return };
        let Phase::Summarizing { cut, then } =
            std::mem::replace(&mut run.phase, Phase::BetweenTurns)
        else {
            return;
        };
        let turn = run.turns;
        let mut bills = Bill::cut_calls(turn, &answer.cut_calls, cut.tokens);
        if let Ok(reply) = &answer.result {
            // The summary was paid for like any call.
            bills.push(Bill::of(turn, reply));
        }
        let then = AfterBilling::Summary {
            cut,
            then,
            result: answer.result,
        };
        self.bill_then(myself, bills, then);
    }

    /// Prunes the conversation by `cut`, behind the summary the model gave if it gave one,
    /// then goes on as `then` says.
    pub(super) fn summarized(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        cut: Cut,
        then: AfterCompaction,
        result: Result<ModelReply, ProviderError>,
    ) {
        let summary = match result {
            Ok(reply) => {
                let text = reply.response.text.trim().to_owned();
                if text.is_empty() {
                    self.summary_failed(cut, "the model answered with no text");
                    None
                } else {
                    Some(text)
                }
            }
            Err(e) => {
                self.summary_failed(cut, &e.to_string());
                None
            }
        };
        self.compact(cut, summary);
        self.go_on(myself, then);
    }

    fn summary_failed(&self, cut: Cut, why: &str) {
        if let Some(run) = &self.run {
            run.events.emit(EventKind::Error {
                message: format!(
                    "summarizing the {} oldest messages failed ({why}); they leave the context \
                     without a summary",
                    cut.drop
                ),
            });
        }
    }

    /// Leaves the messages `cut` drops out of the window, behind `summary` if there is one.
    pub(super) fn compact(&mut self, cut: Cut, summary: Option<String>) {
        let before = self.context_tokens();
        let summarized = summary.is_some();
        self.history.compact(cut.drop, summary);
        let after = self.context_tokens();
        if let Some(run) = self.run.as_mut() {
            run.flush_prompted = false;
            run.events.emit(EventKind::ContextPruned {
                dropped_messages: cut.drop as u64,
                summarized,
                tokens_before: before,
                tokens_after: after,
            });
        }
    }
}
