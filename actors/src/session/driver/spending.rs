//! How the run spends: every model call is priced and recorded by the cost ledger, whose
//! receipt says whether another call may be made.

use super::{Driver, Step};
use crate::cost_ledger::{dollars, BudgetNotice, MICROCENTS_PER_CENT};
use crate::cost_ledger::{PriceSource, Receipt, UsageReport};
use crate::event::{BudgetScope, CallPurpose, EventKind, RunStatus};
use crate::llm_stream::ModelReply;
use crate::provider::Usage;
use crate::session::siblings::{self, Refusal};

impl Driver {
    /// Has the ledger price and record `bills` (calls made for `purpose`), in order, and
    /// publishes what its receipts say; a refusal they carry stops the run before its next
    /// call.
    pub(super) async fn bill(&mut self, purpose: CallPurpose, bills: Vec<Bill>) -> Step<()> {
        if bills.is_empty() {
            return Ok(());
        }
        let run = &mut self.run;
        let mut reports = Vec::with_capacity(bills.len());
        for bill in &bills {
            let call = run.spent_mut().count_call(bill.usage);
            reports.push(UsageReport {
                session_id: self.session.id.clone(),
                run_id: run.id().clone(),
                call,
                model: bill.model.clone(),
                usage: bill.usage,
                estimated: bill.estimated,
                served_locally: run.call().models().serves_locally(&bill.model),
                run_limit_cents: run.limits().per_run_limit_cents(),
            });
        }
        // Recorded in a task of its own: a stop meanwhile ends the run, not the recording, so
        // every call made is counted against the budgets.
        let ledger = self.session.services.ledger.clone();
        let recording = tokio::spawn(async move { ledger.record(reports).await });
        let receipts = match self.wait(recording).await? {
            Ok(receipts) => receipts,
            Err(e) => Err(format!("recording the run's model calls failed: {e}")),
        };
        let receipts = receipts.map_err(|reason| self.failure(reason))?;
        for (bill, receipt) in bills.into_iter().zip(receipts) {
            self.apply_receipt(bill, purpose, receipt);
        }
        Ok(())
    }

    /// Publishes what a receipt says: the call's cost, budget warnings, and a limit reached
    /// (which stops the run before its next call).
    fn apply_receipt(&mut self, bill: Bill, purpose: CallPurpose, receipt: Receipt) {
        let run = &mut self.run;
        let Bill {
            turn,
            model,
            usage,
            estimated,
            expected,
        } = bill;
        let model = model.as_str();
        run.spent_mut().priced_at(receipt.run.cost_microcents);
        run.events().emit(EventKind::ModelUsage {
            turn,
            purpose,
            model: model.to_owned(),
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            estimated,
            cost_cents: receipt.call_microcents as f64 / 1_000_000.0,
            counted_input_tokens: expected.map(|(counted, _)| counted),
            expected_input_tokens: expected.map(|(_, served)| served),
        });
        if receipt.price_source == PriceSource::Unknown && run.spent_mut().tell_unpriced() {
            run.events().emit(EventKind::GuardianBudgetAlert {
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
            run.events().emit(warning.warning());
        }
        if let Some(e) = receipt.store_error {
            run.events().emit(EventKind::Error {
                message: format!(
                    "the cost ledger's totals could not be stored ({e}); they are written again \
                     with this call"
                ),
            });
        }
        run.spent_mut()
            .refuse(siblings::admit(receipt.next_call).err());
        // A goal's cost constraint is a per-run limit too.
        let goal_cents = run.goal().and_then(|g| g.constraints.cost_cents);
        // As for every limit, 0 means none.
        if let Some(cents) = goal_cents.filter(|c| *c > 0 && run.spent().may_call()) {
            let limit = cents.saturating_mul(MICROCENTS_PER_CENT);
            let spent = run.spent().cost_microcents();
            if spent >= limit {
                let message = format!(
                    "the run has spent {} of its goal's cost constraint ({}); it stops before \
                     its next model call",
                    dollars(spent),
                    dollars(limit)
                );
                run.spent_mut().refuse(Some(Refusal {
                    status: RunStatus::BudgetExceeded,
                    limit: Some(BudgetNotice {
                        scope: BudgetScope::Run,
                        spent_microcents: spent,
                        limit_microcents: limit,
                        message: message.clone(),
                    }),
                    reason: message,
                    // The goal's own bound: a continue's budget would not raise it.
                    parks: None,
                }));
            }
        }
        if let Some(refusal) = run.spent().refusal() {
            // Said now, even if this call's answer ends the run.
            announce(run.events(), refusal);
        }
    }
}

/// A model call for the ledger to price and record: `usage` as the server reported it, or
/// `estimated`.
pub(crate) struct Bill {
    pub turn: u32,
    pub model: String,
    pub usage: Usage,
    pub estimated: bool,
    /// Ryvos's count of the request and what it expected the server to count, where it
    /// counted it.
    pub expected: Option<(u64, u64)>,
}

impl Bill {
    /// The attempts whose streams were cut after the server began to answer: each may have
    /// been billed for its input, so each is counted, estimated, as `input_tokens`.
    pub(super) fn cut_calls(turn: u32, models: &[String], input_tokens: u64) -> Vec<Bill> {
        let usage = Usage {
            input_tokens,
            output_tokens: 0,
        };
        models
            .iter()
            .map(|model| Bill::estimated(turn, model, usage))
            .collect()
    }

    /// A call whose usage is estimated.
    pub(super) fn estimated(turn: u32, model: &str, usage: Usage) -> Bill {
        Bill {
            turn,
            model: model.to_owned(),
            usage,
            estimated: true,
            expected: None,
        }
    }

    /// The call that gave `reply`.
    pub(super) fn of(turn: u32, reply: &ModelReply) -> Bill {
        Bill {
            turn,
            model: reply.model.clone(),
            usage: reply.usage,
            estimated: reply.usage_estimated,
            expected: None,
        }
    }

    /// The same bill, with Ryvos's count of the request and what it expected the server to
    /// count.
    pub(super) fn expecting(mut self, expected: Option<(u64, u64)>) -> Self {
        self.expected = expected;
        self
    }
}

/// Publishes why the ledger refuses further calls.
pub(super) fn announce(events: &crate::event::RunEvents, refusal: &Refusal) {
    match &refusal.limit {
        Some(limit) => events.emit(limit.exceeded()),
        None => events.emit(EventKind::Error {
            message: refusal.reason.clone(),
        }),
    }
}
