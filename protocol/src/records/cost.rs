//! What the cost ledger keeps.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Spending under one ledger key: `run:<id>`, `session:<id>`, `day:YYYY-MM-DD` or
/// `month:YYYY-MM` (UTC).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CostTotals {
    /// Model calls recorded.
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Millionths of a cent: tokens times a price in cents per million tokens, so sums of
    /// integer prices are exact.
    pub cost_microcents: u64,
    /// Calls whose usage the server did not report, estimated with the tokenizer.
    pub estimated_calls: u64,
}

impl CostTotals {
    /// The cost in cents.
    pub fn cents(&self) -> f64 {
        self.cost_microcents as f64 / 1_000_000.0
    }

    /// Adds one call's totals.
    pub fn add(&mut self, call: &CostTotals) {
        self.calls += call.calls;
        self.input_tokens += call.input_tokens;
        self.output_tokens += call.output_tokens;
        self.cost_microcents += call.cost_microcents;
        self.estimated_calls += call.estimated_calls;
    }
}
