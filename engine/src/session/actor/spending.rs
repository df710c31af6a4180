//! How the loop spends: every model call is priced and recorded by the cost ledger, whose
//! receipt says whether another call may be made.

use super::{SessionMsg, SessionState};
use crate::cost_ledger::{dollars, BudgetNotice, MICROCENTS_PER_CENT};
use crate::cost_ledger::{PriceSource, UsageReport};
use crate::event::{BudgetScope, EventKind, RunEvents, RunStatus};
use crate::provider::Usage;
use crate::session::oversight::{self, Refusal};
use ractor::ActorRef;

impl SessionState {
    /// Ends the run because the ledger refused its next model call; `announced` when the
    /// refusal was already published (as the call that reached the limit was recorded).
    pub(super) fn refuse(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        refusal: Refusal,
        announced: bool,
    ) {
        if let (Some(run), false) = (&self.run, announced) {
            announce(&run.events, &refusal);
        }
        self.finish(myself, refusal.status, Some(refusal.reason));
    }

    /// Records the attempts whose streams were cut after the server began to answer: each
    /// may have been billed for its input, so each is counted, estimated, as `input_tokens`.
    pub(super) async fn record_cut_calls(
        &mut self,
        turn: u32,
        models: &[String],
        input_tokens: u64,
    ) -> Result<(), String> {
        for model in models {
            let usage = Usage {
                input_tokens,
                output_tokens: 0,
            };
            self.record_call(turn, model, usage, true).await?;
        }
        Ok(())
    }

    /// Has the ledger price and record a model call (`usage` as the server reported it, or
    /// `estimated`), and publishes what it found: the call's cost, budget warnings, and a
    /// limit reached (which stops the run before its next call).
    pub(super) async fn record_call(
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
        // A goal's cost constraint is a per-run limit too.
        let goal_cents = run.goal.as_ref().and_then(|g| g.constraints.cost_cents);
        // As for every limit, 0 means none.
        if let Some(cents) = goal_cents.filter(|c| *c > 0 && run.refusal.is_none()) {
            let limit = cents.saturating_mul(MICROCENTS_PER_CENT);
            if run.cost_microcents >= limit {
                let message = format!(
                    "the run has spent {} of its goal's cost constraint ({}); it stops before \
                     its next model call",
                    dollars(run.cost_microcents),
                    dollars(limit)
                );
                run.refusal = Some(Refusal {
                    status: RunStatus::BudgetExceeded,
                    limit: Some(BudgetNotice {
                        scope: BudgetScope::Run,
                        spent_microcents: run.cost_microcents,
                        limit_microcents: limit,
                        message: message.clone(),
                    }),
                    reason: message,
                });
            }
        }
        if let Some(refusal) = &run.refusal {
            // Said now, even if this call's answer ends the run.
            announce(&run.events, refusal);
        }
        Ok(())
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
