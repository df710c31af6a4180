//! Keeping the conversation within its budget: when the context would reach the Guardian's hard
//! limit, the oldest messages leave the window (the store keeps them), summarized first by the
//! model when `enable_summarization` is on. A summary that fails, or stalls, still lets the
//! pruning happen: a session never becomes unusable because its history grew.

use super::spending::Bill;
use super::waiting::{OnInterrupt, Waited};
use super::{Driver, Step};
use crate::context::{facts, prune_to_budget, summary, Cut};
use crate::event::{CallPurpose, EventKind};
use crate::llm_stream::{ModelAnswer, Purpose, StreamJob};
use crate::provider::ProviderError;
use ryvos_protocol::hook::HookEvent;
use tokio::time::Instant;

/// After pruning, the conversation is brought down to this share of `max_context_tokens`,
/// leaving room to grow before the next pruning.
pub(super) const PRUNE_TARGET_PERCENT: u64 = 60;
/// At this share of `max_context_tokens` the model is asked to save memories.
pub(super) const FLUSH_PERCENT: u64 = 85;
/// The tool the memory flush asks the model to use.
const MEMORY_WRITE: &str = "memory_write";
/// What a summary's model call is called when it is lost.
const SUMMARY_CALL: &str = "the summary call";
/// Room kept for the summary that replaces what is pruned, as a share of `max_context_tokens`.
const SUMMARY_RESERVE_PERCENT: u64 = 5;

impl Driver {
    /// The cut to make now, if the context has reached the point where the Guardian would stop
    /// the run (`token_budget_hard` of `max_context_tokens`). The check is O(1).
    pub(super) fn cut_needed(&self) -> Option<Cut> {
        let agent = &self.session.services.agent;
        let max = self.window();
        let trigger = max.saturating_mul(u64::from(agent.guardian.token_budget_hard)) / 100;
        if self.context_tokens() < trigger {
            return None;
        }
        self.pruning_cut()
    }

    /// The cut a pruning makes: down to [`PRUNE_TARGET_PERCENT`] of the budget.
    fn pruning_cut(&self) -> Option<Cut> {
        let max = self.window();
        self.cut_down_to(max.saturating_mul(PRUNE_TARGET_PERCENT) / 100)
    }

    /// The cut that brings the context (system prompt included) down to `target` tokens (as
    /// the model's server counts them), if one can.
    pub(super) fn cut_down_to(&self, target: u64) -> Option<Cut> {
        let agent = &self.session.services.agent;
        let max = self.as_counted(self.window());
        let system: u64 = self.run.system().size().tokens().into();
        let target = self.as_counted(target).saturating_sub(system);
        let reserve = if agent.enable_summarization {
            max.saturating_mul(SUMMARY_RESERVE_PERCENT) / 100
        } else {
            0
        };
        let history = &self.session.history;
        prune_to_budget(
            &history.snapshot(),
            history.token_counts(),
            history.total_tokens(),
            target,
            reserve,
            agent.min_tail,
        )
    }

    /// Once the context reaches [`FLUSH_PERCENT`] of its budget (and once more after each
    /// pruning), asks the model to save what must outlive the oldest messages, when it has a
    /// `memory_write` tool to do so. The exact facts of the messages that will leave (see
    /// [`facts`]) are saved to memory by the runtime itself, whatever the model writes.
    pub(super) fn prompt_memory_flush(&mut self) {
        let max = self.window();
        let context = self.context_tokens();
        let has_tool = self.run.tools().get(MEMORY_WRITE).is_some();
        if self.run.memory_flush_asked()
            || !has_tool
            || context < max.saturating_mul(FLUSH_PERCENT) / 100
        {
            return;
        }
        self.run.set_memory_flush_asked(true);
        let leaving = self.facts_leaving_soon();
        let percent = context.saturating_mul(100) / max.max(1);
        // Said of this point in the conversation, not of now: it stays true once a compaction
        // has made room (the note stays in the window, the messages it spoke of do not).
        let message = format!(
            "[Memory] Here the conversation reached {percent}% of its context budget, and its \
             oldest messages were about to leave the context. If anything in them must be \
             remembered beyond this conversation and is not saved yet, save it with \
             {MEMORY_WRITE} (one fact per call), then go on with the task."
        );
        // Saved apart, not listed here: the list would grow the context near its limit.
        self.save_facts(leaving);
        let run = &mut self.run;
        run.events().emit(EventKind::MemoryFlush {
            message: message.clone(),
            context_tokens: context,
        });
        let flush = crate::message::Message::System { content: message };
        self.session.history.push(flush);
    }

    /// The exact facts (shown, at most `[agent] summary_facts`) of the messages the next
    /// pruning would take out of the window.
    fn facts_leaving_soon(&self) -> Vec<String> {
        let Some(cut) = self.pruning_cut() else {
            return Vec::new();
        };
        let part = self.session.history.snapshot();
        let found = facts::extract(&part[..cut.drop]);
        let most = self.session.services.agent.summary_facts;
        found.iter().take(most).map(facts::Fact::shown).collect()
    }

    /// Saves `facts` to memory as one entry, in a task of its own (the run does not wait for
    /// it); a failure is said as a warning.
    fn save_facts(&self, facts: Vec<String>) {
        if facts.is_empty() {
            return;
        }
        let memory = self.session.services.memory.clone();
        let (session, events) = (self.session.id.clone(), self.run.events().clone());
        let content = format!(
            "Exact facts from an earlier part of session {session}:\n- {}",
            facts.join("\n- ")
        );
        tokio::spawn(async move {
            let tags = vec!["facts".to_owned(), "compaction".to_owned()];
            if let Err(e) = memory.write(&session, &content, tags).await {
                events.emit(EventKind::Warning {
                    message: format!("saving the conversation's exact facts to memory failed: {e}"),
                });
            }
        });
    }

    /// Makes room when the context has reached the Guardian's hard limit.
    pub(super) async fn make_room(&mut self) -> Step<()> {
        match self.cut_needed() {
            Some(cut) => self.compact(cut).await,
            None => Ok(()),
        }
    }

    /// Leaves the messages `cut` drops out of the window, behind the model's summary of them
    /// when summarization is on and the budget allows a call. The exact facts the summary left
    /// out (see [`facts`]) are kept verbatim below it, as many as `[agent] summary_facts`.
    pub(super) async fn compact(&mut self, cut: Cut) -> Step<()> {
        self.tell_hooks(compaction(HookEvent::PreCompact)).await;
        let agent = &self.session.services.agent;
        let wants_summary = agent.enable_summarization && self.run.spent().may_call();
        let summary = match wants_summary {
            true => self.summarize(cut).await?,
            false => None,
        };
        let had_summary = summary.is_some();
        let (mut text, mut kept, mut dropped) = match wants_summary {
            true => self.with_facts(cut, summary),
            false => (None, Vec::new(), Vec::new()),
        };
        // A compaction that would not shrink the window is not one: a summary as large as
        // what it replaces is left out (what it replaced is still stored, and in memory's
        // facts).
        let leaving: u64 = (self.session.history.token_counts()[..cut.drop])
            .iter()
            .map(|t| u64::from(*t))
            .sum();
        let replacing = text
            .as_deref()
            .map_or(0, |t| u64::from(crate::tokens::count_text(t)));
        if replacing >= leaving {
            if text.is_some() {
                self.run.events().emit(EventKind::Warning {
                    message: format!(
                        "the summary ({replacing} tokens) was no smaller than the {} messages \
                         it would replace ({leaving} tokens); they leave the window without it",
                        cut.drop
                    ),
                });
            }
            (text, kept, dropped) = (None, Vec::new(), Vec::new());
        }
        if leaving == 0 {
            return Ok(());
        }
        let summarized = had_summary && text.is_some();
        let model = summarized.then(|| self.run.call().model().to_owned());
        let before = self.context_tokens();
        let record = self.session.history.compact(cut.drop, text);
        record.facts_kept = kept;
        record.facts_dropped = dropped;
        record.model = model;
        record.tokens_before = before;
        let after = self.context_tokens();
        let Some(record) = self.session.history.compaction_mut() else {
            return Ok(());
        };
        record.tokens_after = after;
        let event = EventKind::ContextPruned {
            dropped_messages: cut.drop as u64,
            summarized,
            tokens_before: before,
            tokens_after: after,
            first_seq: record.first_seq,
            first_kept_seq: record.first_kept_seq,
            facts_kept: record.facts_kept.clone(),
            facts_dropped: record.facts_dropped.clone(),
            model: record.model.clone(),
        };
        self.run.set_memory_flush_asked(false);
        self.run.events().emit(event);
        self.tell_hooks(compaction(HookEvent::PostCompact)).await;
        Ok(())
    }

    /// `summary` of the part `cut` drops, with the exact facts of that part it left out kept
    /// below it; those facts (shown), and those past the budget.
    fn with_facts(
        &self,
        cut: Cut,
        summary: Option<String>,
    ) -> (Option<String>, Vec<String>, Vec<String>) {
        let part = self.session.history.snapshot();
        let found = facts::extract(&part[..cut.drop]);
        let most = self.session.services.agent.summary_facts;
        let summary = summary.unwrap_or_default();
        let (kept, dropped) = facts::left_out(found, &summary, most);
        let text = [summary, facts::block(&kept)]
            .into_iter()
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join("\n\n");
        let shown = |facts: Vec<facts::Fact>| facts.iter().map(facts::Fact::shown).collect();
        (
            Some(text).filter(|t| !t.is_empty()),
            shown(kept),
            shown(dropped),
        )
    }

    /// The model's summary of the messages `cut` drops, billed; `None` when it failed, gave no
    /// text, or stayed silent for the stall timeout (then it is cut).
    async fn summarize(&mut self, cut: Cut) -> Step<Option<String>> {
        let dropped = self.session.history.snapshot();
        let run = &mut self.run;
        let (cancel, heartbeat) = run.start_call();
        let mut answer = self
            .session
            .services
            .llm
            .stream(SUMMARY_CALL, |on_done| StreamJob {
                models: run.call().models().clone(),
                request: summary::request(&dropped[..cut.drop]),
                events: run.events().clone(),
                purpose: Purpose::Summary { messages: cut.drop },
                counted_input: None,
                encoded: Default::default(),
                cancel,
                heartbeat,
                on_done,
            });
        drop(dropped);
        // The stall watch is the Guardian's: without it, the call has only its own deadline.
        let watched = self.session.services.agent.guardian.enabled;
        let timeout = self.stall_timeout();
        let answer = loop {
            let silent = self.run.call().heartbeat().silent_for();
            if watched && silent >= timeout {
                break self.cut_summary(silent);
            }
            let tick = Some(Instant::now() + (timeout - silent)).filter(|_| watched);
            let waited = self
                .wait_until(&mut answer, tick, OnInterrupt::AfterStep)
                .await?;
            if let Waited::Done(answer) = waited {
                break answer.unwrap_or_else(|| ModelAnswer::lost(SUMMARY_CALL));
            }
        };
        let turn = self.run.turns();
        let mut bills = Bill::cut_calls(turn, &answer.cut_calls, cut.tokens);
        if let Ok(reply) = &answer.result {
            // The summary was paid for like any call.
            bills.push(Bill::of(turn, reply));
        }
        self.bill(CallPurpose::Summary, bills).await?;
        let failed = match answer.result {
            Ok(reply) if !reply.response.text.trim().is_empty() => {
                return Ok(Some(reply.response.text.trim().to_owned()))
            }
            Ok(_) => "the model answered with no text".to_owned(),
            Err(e) => e.to_string(),
        };
        self.run.events().emit(EventKind::Error {
            message: format!(
                "summarizing the {} oldest messages failed ({failed}); they leave the context \
                 without a summary",
                cut.drop
            ),
        });
        Ok(None)
    }

    /// A summary call silent for the stall timeout is cut: paid for (its input at least,
    /// estimated), and the pruning goes on without it, so a hung summarizer never holds the
    /// run.
    fn cut_summary(&mut self, silent: std::time::Duration) -> ModelAnswer {
        self.run.call().cut();
        let error = ProviderError::StreamCut(format!("silent for {} s", silent.as_secs()));
        let mut answer = ModelAnswer::failed(error);
        answer.cut_calls.push(self.run.call().model().to_owned());
        answer
    }
}

/// A compaction as hooks are told it: the runtime's own, when the context fills up.
fn compaction(event: HookEvent) -> crate::hooks::Step<'static> {
    crate::hooks::Step::Compact {
        event,
        trigger: "auto",
    }
}
