//! What a run has spent, as the cost ledger priced it, and whether it may spend more: its
//! own part of the run's state, changed only through these methods (the driver's billing
//! step counts and prices calls; the others read).

use super::siblings::Refusal;
use crate::provider::Usage;
use crate::store::RunRecord;

/// What a run has spent, and whether it may spend more.
#[derive(Default)]
pub(super) struct Spending {
    usage: Usage,
    /// What the run's calls cost so far, in millionths of a cent, as the ledger priced them.
    cost_microcents: u64,
    /// Model calls recorded with the ledger (cut ones too): each report's number.
    model_calls: u32,
    /// Set when the ledger's receipt for the last call said no further call may be made.
    refusal: Option<Refusal>,
    /// The run has been told its model has no known price.
    unpriced_told: bool,
}

impl Spending {
    /// What the run `parked` had spent: a continued run's totals count from there.
    pub(super) fn taken_up(parked: &RunRecord) -> Self {
        Self {
            usage: Usage {
                input_tokens: parked.input_tokens,
                output_tokens: parked.output_tokens,
            },
            cost_microcents: parked.cost_microcents,
            model_calls: parked.model_calls,
            ..Self::default()
        }
    }

    /// Counts a model call that used `usage`; its number among the run's calls.
    pub(super) fn count_call(&mut self, usage: Usage) -> u32 {
        self.model_calls += 1;
        self.usage.input_tokens += usage.input_tokens;
        self.usage.output_tokens += usage.output_tokens;
        self.model_calls
    }

    /// The ledger's total for the run so far.
    pub(super) fn priced_at(&mut self, cost_microcents: u64) {
        self.cost_microcents = cost_microcents;
    }

    /// Whether the run is still to be told its model has no price: true the first time only.
    pub(super) fn tell_unpriced(&mut self) -> bool {
        !std::mem::replace(&mut self.unpriced_told, true)
    }

    /// No further model call may be made, for `refusal`'s reason (`None`: it may again).
    pub(super) fn refuse(&mut self, refusal: Option<Refusal>) {
        self.refusal = refusal;
    }

    /// Why no further model call may be made, if one may not.
    pub(super) fn refusal(&self) -> Option<&Refusal> {
        self.refusal.as_ref()
    }

    /// Takes the refusal, to end the run with it.
    pub(super) fn take_refusal(&mut self) -> Option<Refusal> {
        self.refusal.take()
    }

    /// Whether another model call may be made.
    pub(super) fn may_call(&self) -> bool {
        self.refusal.is_none()
    }

    pub(super) fn usage(&self) -> Usage {
        self.usage
    }

    pub(super) fn cost_microcents(&self) -> u64 {
        self.cost_microcents
    }

    pub(super) fn model_calls(&self) -> u32 {
        self.model_calls
    }
}
