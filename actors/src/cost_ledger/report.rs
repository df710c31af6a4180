//! The spending report behind `ryvos cost`: this month against its limits, each day of the
//! month, and each session.

use super::period::Period;
use crate::config::BudgetConfig;
use crate::store::{CostTotals, Store, StoreError};
pub(super) use ryvos_protocol::report::{CostReport, ModelSpend, Spend};

/// How many sessions the report lists (the most expensive first).
const SESSIONS_LISTED: usize = 20;

fn spend(key: &str, t: &CostTotals) -> Spend {
    Spend {
        key: key.to_owned(),
        calls: t.calls,
        input_tokens: t.input_tokens,
        output_tokens: t.output_tokens,
        cost_cents: t.cents(),
        estimated_calls: t.estimated_calls,
    }
}

/// `model-day:YYYY-MM-DD:MODEL`'s spending (a model's name may hold `:` itself).
fn model_spend(key: &str, t: &CostTotals) -> Option<ModelSpend> {
    let rest = key.strip_prefix("model-day:")?;
    let (day, model) = (rest.get(..10)?, rest.get(11..)?);
    Some(ModelSpend {
        day: day.to_owned(),
        model: model.to_owned(),
        calls: t.calls,
        cost_cents: t.cents(),
    })
}

/// Reads the report from the store as of `now_ms`.
pub(crate) async fn cost_report(
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
        .map(|(k, t)| spend(k.trim_start_matches("day:"), t))
        .collect();
    let models = store
        .cost_totals_with_prefix(&format!("model-day:{}-", period.month))
        .await?
        .iter()
        .filter_map(|(k, t)| model_spend(k, t))
        .collect();
    let mut sessions: Vec<Spend> = store
        .cost_totals_with_prefix("session:")
        .await?
        .iter()
        .map(|(k, t)| spend(k.trim_start_matches("session:"), t))
        .collect();
    let session_count = sessions.len();
    sessions.sort_by(|a, b| b.cost_cents.total_cmp(&a.cost_cents));
    sessions.truncate(SESSIONS_LISTED);
    let limit_reached = budget.monthly_limit_cents > 0
        && month.cost_microcents >= budget.monthly_limit_cents.saturating_mul(1_000_000);
    Ok(CostReport {
        month: spend(&period.month, &month),
        monthly_limit_cents: budget.monthly_limit_cents,
        warning_threshold_cents: budget.warning_threshold_cents,
        per_run_limit_cents: budget.per_run_limit_cents,
        refused_until: limit_reached.then(|| period.next_month_start()),
        days,
        models,
        sessions,
        session_count,
    })
}
