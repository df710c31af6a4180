//! A turn's calls and its end: the calls run (once the turn that asked for them is durable, if
//! any has side effects), their results appended paired with them; then room is made in the
//! context, the Guardian reviews the turn, the turn is stored, and the Judge looks at the
//! progress every few turns.

use super::waiting::OnInterrupt;
use super::{Driver, Step};
use crate::event::StallPhase;
use crate::guardian::{CallReport, TurnReport};
use crate::message::{Message, ToolCall};
use crate::session::turn::CallsInFlight;
use crate::tool_executor::{lost_outcomes, ToolBatch};

/// What the end of a turn needs of its calls.
pub(super) struct TurnCalls {
    /// The calls as the Guardian reviews them.
    reports: Vec<CallReport>,
    /// The tools called, stored with the turn.
    tools_called: Vec<String>,
}

impl Driver {
    /// Runs `calls` and appends their results; first waits until the turn that asked for them
    /// is durable when `durable_first` says, or when any of them has side effects (the turn
    /// must survive a crash before anything changes).
    pub(super) async fn run_tools(
        &mut self,
        calls: Vec<ToolCall>,
        durable_first: bool,
    ) -> Step<TurnCalls> {
        let registry = self.run.tools();
        let side_effects = calls.iter().any(|c| {
            registry
                .get(&c.name)
                .is_some_and(|t| t.tier().has_side_effects())
        });
        if durable_first || side_effects {
            self.submit(None, None);
            self.run
                .turn_mut()
                .calls(CallsInFlight::AwaitingDurability(calls.clone()));
            self.durable(OnInterrupt::AtOnce).await?;
        }
        self.run
            .turn_mut()
            .calls(CallsInFlight::Running(calls.clone()));
        // A completed model answer is progress: the stall clock starts again.
        self.run.call().heartbeat().beat();
        // A call's message is stored before anything that changes the world runs.
        let made_at = (calls.first())
            .and_then(|c| self.session.history.seq_of_call(&c.id))
            .unwrap_or_else(|| self.session.history.next_seq());
        // Only the first batch after a reload holds calls a crash cut off.
        let cut_off = std::mem::take(&mut self.session.cut_off);
        let run = &self.run;
        let tools = &self.session.services.tools;
        let batch = tools.execute(
            |on_done| ToolBatch {
                calls: calls.clone(),
                registry: run.tools().clone(),
                made_at,
                cut_off: cut_off.clone(),
                ctx: run.tool_context(&self.session.id),
                events: run.events().clone(),
                cut_at_output_limit: run.turn().answer_cut(),
                on_message: run.on_message().cloned(),
                on_done,
            },
            &calls,
        );
        let names = Self::tool_names(&calls);
        let outcomes = self
            .watched(batch, StallPhase::Tools, names, OnInterrupt::StopTools)
            .await?
            .flatten()
            .unwrap_or_else(|| lost_outcomes(&calls));
        let mut reports = Vec::with_capacity(outcomes.len());
        let tools_called = outcomes.iter().map(|o| o.name.clone()).collect();
        for o in outcomes {
            let arguments = calls
                .iter()
                .find(|c| c.id == o.call_id)
                .map_or("", |c| c.arguments.as_str());
            reports.push(CallReport::new(&o.name, arguments, &o.content, o.is_error));
            self.session.history.push(Message::from(o));
        }
        // Every call that ran has its result: a stop from here on must not add another.
        self.run.turn_mut().calls_answered();
        self.snapshot_workspace().await;
        Ok(TurnCalls {
            reports,
            tools_called,
        })
    }

    /// After a turn's results: room made if the context needs it, the Guardian's review, the
    /// turn stored with it, and the Judge's look at the progress when it is due.
    pub(super) async fn end_turn(&mut self, turn: TurnCalls) -> Step<()> {
        self.count_near_limits();
        // Asked before any pruning, so a turn that jumps past both thresholds is not skipped.
        self.prompt_memory_flush();
        if let Some(cut) = self.cut_needed() {
            // The turn is stored before the conversation is compacted.
            self.close_turn(turn.tools_called.clone(), None);
            self.compact(cut).await?;
        }
        let stop = match self.session.services.agent.guardian.enabled {
            true => self.review(turn.reports).await?,
            false => None,
        };
        // The turn and the Guardian's view of it are stored together.
        self.close_turn(turn.tools_called, None);
        if let Some((status, reason)) = stop {
            return Err(self.stopped_by_guardian(status, reason));
        }
        if self.periodic_judging_due() {
            let progress = self.run.last_text().to_owned();
            return self.judge(progress, true).await;
        }
        Ok(())
    }

    /// The Guardian's review of the turn, applied; the stop it asks for, if any.
    async fn review(
        &mut self,
        reports: Vec<CallReport>,
    ) -> Step<Option<(crate::event::RunStatus, String)>> {
        let report = TurnReport {
            calls: reports,
            context_tokens: self.context_tokens(),
        };
        // A recovered run counts its stored turns: only a run's very first turn is `first`.
        let first = self.run.turns() == 1;
        let guardian = self.session.services.guardian.clone();
        let run_id = self.run.id().clone();
        let review = self
            .wait(async move { guardian.review(run_id, report, first).await })
            .await?;
        Ok(self.apply_review(review))
    }
}
