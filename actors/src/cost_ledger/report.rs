//! The spending report behind `ryvos cost`: this month against its limits, each day of the
//! month, and each session.

use super::period::Period;
use crate::config::BudgetConfig;
use crate::store::{CostTotals, Store, StoreError};
use serde::Serialize;

/// How many sessions the report lists (the most expensive first).
const SESSIONS_LISTED: usize = 20;

/// Spending under one key.
#[derive(Clone, Debug, PartialEq, Serialize)]
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

impl Spend {
    fn new(key: &str, t: &CostTotals) -> Self {
        Self {
            key: key.to_owned(),
            calls: t.calls,
            input_tokens: t.input_tokens,
            output_tokens: t.output_tokens,
            cost_cents: t.cents(),
            estimated_calls: t.estimated_calls,
        }
    }
}

/// The report.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
    /// The sessions that spent most, all time, most first.
    pub sessions: Vec<Spend>,
    /// How many sessions have spending recorded.
    pub session_count: usize,
}

/// Reads the report from the store as of `now_ms`.
pub async fn cost_report(
    store: &Store,
    budget: &BudgetConfig,
    now_ms: u64,
) -> Result<CostReport, StoreError> {
    let period = Period::of(now_ms);
    let month = store
        .cost_totals(&format!("month:{}", period.month))
        .await?
        .unwrap_or_default();
    let days = store
        .cost_totals_with_prefix(&format!("day:{}-", period.month))
        .await?
        .iter()
        .map(|(k, t)| Spend::new(k.trim_start_matches("day:"), t))
        .collect();
    let mut sessions: Vec<Spend> = store
        .cost_totals_with_prefix("session:")
        .await?
        .iter()
        .map(|(k, t)| Spend::new(k.trim_start_matches("session:"), t))
        .collect();
    let session_count = sessions.len();
    sessions.sort_by(|a, b| b.cost_cents.total_cmp(&a.cost_cents));
    sessions.truncate(SESSIONS_LISTED);
    let limit_reached = budget.monthly_limit_cents > 0
        && month.cost_microcents >= budget.monthly_limit_cents.saturating_mul(1_000_000);
    Ok(CostReport {
        month: Spend::new(&period.month, &month),
        monthly_limit_cents: budget.monthly_limit_cents,
        warning_threshold_cents: budget.warning_threshold_cents,
        per_run_limit_cents: budget.per_run_limit_cents,
        refused_until: limit_reached.then(|| period.next_month_start()),
        days,
        sessions,
        session_count,
    })
}
