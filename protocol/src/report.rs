//! What the engine reports on request: spending against the budget.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Spending under one key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Spend {
    /// The day (`YYYY-MM-DD`), month (`YYYY-MM`) or session id.
    pub key: String,
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_cents: f64,
    /// Calls whose usage was estimated with the tokenizer (the server sent none).
    pub estimated_calls: u64,
}

/// One model's spending on one day.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ModelSpend {
    /// `YYYY-MM-DD` (UTC).
    pub day: String,
    pub model: String,
    pub calls: u64,
    pub cost_cents: f64,
}

/// Spending this month against the limits, per day and per session (`ryvos cost`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
// Closed in the schema: a client may rely on every field being documented.
#[schemars(deny_unknown_fields)]
pub struct CostReport {
    /// This month (UTC).
    pub month: Spend,
    /// 0 when there is no such limit.
    pub monthly_limit_cents: u64,
    pub warning_threshold_cents: u64,
    pub per_run_limit_cents: u64,
    /// When the month's limit is reached: the day new runs are accepted again.
    pub refused_until: Option<String>,
    /// Each day of this month with spending, oldest first.
    pub days: Vec<Spend>,
    /// Each model's spending on each day of this month, by day, then model.
    #[serde(default)]
    pub models: Vec<ModelSpend>,
    /// The sessions that spent most, all time, most first.
    pub sessions: Vec<Spend>,
    /// How many sessions have spending recorded.
    pub session_count: usize,
}
