//! Budget rules, as pure functions of the totals: when to warn, when to refuse a model call.
//!
//! Amounts are millionths of a cent, like the ledger's totals. A limit of 0 in the config turns
//! its check off.

use super::period::Period;
use crate::config::BudgetConfig;
use crate::event::{BudgetScope, EventKind};

/// The run warning fires at this share of `per_run_limit_cents`.
const RUN_WARNING_PERCENT: u64 = 80;

/// Costs are kept in millionths of a cent.
pub(crate) const MICROCENTS_PER_CENT: u64 = 1_000_000;

/// The limits in force, in millionths of a cent.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Limits {
    per_run: Option<u64>,
    monthly: Option<u64>,
    monthly_warning: Option<u64>,
}

impl Limits {
    /// Whether any limit or warning watches the month's total.
    pub(super) fn watch_month(&self) -> bool {
        self.monthly.is_some() || self.monthly_warning.is_some()
    }

    /// The limits of `[budget]`.
    pub(super) fn new(budget: &BudgetConfig) -> Self {
        Self {
            per_run: limit(budget.per_run_limit_cents),
            monthly: limit(budget.monthly_limit_cents),
            monthly_warning: limit(budget.warning_threshold_cents),
        }
    }

    /// These limits for a run that set its own per-run limit (`run_cents`, 0: none).
    pub(super) fn for_run(self, run_cents: Option<u64>) -> Self {
        match run_cents {
            Some(cents) => Self {
                per_run: limit(cents),
                ..self
            },
            None => self,
        }
    }
}

/// A limit of `cents` in millionths of a cent; 0 is none.
fn limit(cents: u64) -> Option<u64> {
    (cents > 0).then(|| cents.saturating_mul(MICROCENTS_PER_CENT))
}

/// A threshold reached: said as a warning, or as the reason a call is refused.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BudgetNotice {
    pub scope: BudgetScope,
    pub spent_microcents: u64,
    pub limit_microcents: u64,
    pub message: String,
}

impl BudgetNotice {
    /// As a `BudgetWarning` event.
    pub(crate) fn warning(&self) -> EventKind {
        EventKind::BudgetWarning {
            scope: self.scope,
            spent: cents_number(self.spent_microcents),
            limit: cents_number(self.limit_microcents),
            message: self.message.clone(),
        }
    }

    /// As a `BudgetExceeded` event.
    pub(crate) fn exceeded(&self) -> EventKind {
        EventKind::BudgetExceeded {
            scope: self.scope,
            spent: cents_number(self.spent_microcents),
            limit: cents_number(self.limit_microcents),
            message: self.message.clone(),
        }
    }
}

/// Millionths of a cent as a JSON number of cents.
fn cents_number(microcents: u64) -> serde_json::Number {
    if microcents.is_multiple_of(MICROCENTS_PER_CENT) {
        serde_json::Number::from(microcents / MICROCENTS_PER_CENT)
    } else {
        serde_json::Number::from_f64(microcents as f64 / MICROCENTS_PER_CENT as f64)
            .unwrap_or_else(|| serde_json::Number::from(0))
    }
}

/// An amount for people: `$1.25`, or `$0.0042` below a cent.
pub(crate) fn dollars(microcents: u64) -> String {
    let dollars = microcents as f64 / (100.0 * MICROCENTS_PER_CENT as f64);
    if microcents >= MICROCENTS_PER_CENT {
        format!("${dollars:.2}")
    } else {
        format!("${dollars:.4}")
    }
}

/// Whether another model call may be made, given what the run and the month have spent.
pub(super) fn check(
    limits: &Limits,
    run: u64,
    month: u64,
    period: &Period,
) -> Result<(), BudgetNotice> {
    if let Some(limit) = limits.monthly.filter(|&l| month >= l) {
        return Err(BudgetNotice {
            scope: BudgetScope::Month,
            spent_microcents: month,
            limit_microcents: limit,
            message: format!(
                "spending this month ({}, UTC) is {}, which reaches the monthly limit of {} \
                 (budget.monthly_limit_cents); new runs are refused until {} (UTC), or until \
                 the limit is raised",
                period.month,
                dollars(month),
                dollars(limit),
                period.next_month_start()
            ),
        });
    }
    if let Some(limit) = limits.per_run.filter(|&l| run >= l) {
        return Err(BudgetNotice {
            scope: BudgetScope::Run,
            spent_microcents: run,
            limit_microcents: limit,
            message: format!(
                "this run has spent {}, which reaches its limit of {} \
                 (budget.per_run_limit_cents): the calls the model asked for still run, then \
                 the run stops before its next model call (it parks, to be continued, unless \
                 budget.on_limit = \"stop\" ends it)",
                dollars(run),
                dollars(limit)
            ),
        });
    }
    Ok(())
}

/// The warnings a call crossed, moving the run's spending from `run.0` to `run.1` and the
/// month's from `month.0` to `month.1`. Each warning fires once, when its threshold is crossed.
pub(super) fn warnings_crossed(
    limits: &Limits,
    run: (u64, u64),
    month: (u64, u64),
    period: &Period,
) -> Vec<BudgetNotice> {
    let crossed =
        |threshold: u64, (before, after): (u64, u64)| before < threshold && after >= threshold;
    let mut out = Vec::new();
    if let Some(limit) = limits.per_run {
        let threshold = limit / 100 * RUN_WARNING_PERCENT;
        if crossed(threshold, run) && run.1 < limit {
            out.push(BudgetNotice {
                scope: BudgetScope::Run,
                spent_microcents: run.1,
                limit_microcents: limit,
                message: format!(
                    "this run has spent {} of its {} limit (budget.per_run_limit_cents); it \
                     stops when the limit is reached",
                    dollars(run.1),
                    dollars(limit)
                ),
            });
        }
    }
    if let Some(warning) = limits.monthly_warning {
        let below_limit = limits.monthly.is_none_or(|l| month.1 < l);
        if crossed(warning, month) && below_limit {
            out.push(BudgetNotice {
                scope: BudgetScope::Month,
                spent_microcents: month.1,
                limit_microcents: limits.monthly.unwrap_or(warning),
                message: format!(
                    "spending this month ({}, UTC) is {}, past the warning threshold of {} \
                     (budget.warning_threshold_cents){}",
                    period.month,
                    dollars(month.1),
                    dollars(warning),
                    limits
                        .monthly
                        .map(|l| format!("; runs stop at {}", dollars(l)))
                        .unwrap_or_default()
                ),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(run: u64, month: u64, warning: u64) -> Limits {
        Limits::new(&BudgetConfig {
            per_run_limit_cents: run,
            monthly_limit_cents: month,
            warning_threshold_cents: warning,
            ..BudgetConfig::default()
        })
    }

    const C: u64 = MICROCENTS_PER_CENT;

    #[test]
    fn a_call_is_refused_once_a_limit_is_reached_and_zero_means_no_limit() {
        let p = Period::of(0);
        let l = limits(10, 100, 80);
        assert!(check(&l, 9 * C, 0, &p).is_ok());
        let refused = check(&l, 70 * C, 70 * C, &p).unwrap_err();
        assert_eq!(refused.scope, BudgetScope::Run);
        assert!(refused.message.contains("$0.70") && refused.message.contains("$0.10"));
        let month = check(&l, 0, 100 * C, &p).unwrap_err();
        assert_eq!(month.scope, BudgetScope::Month);
        assert!(month.message.contains("1970-02-01"), "{}", month.message);
        assert!(check(&limits(0, 0, 0), u64::MAX / 2, u64::MAX / 2, &p).is_ok());
    }

    #[test]
    fn a_run_with_its_own_limit_is_held_to_it_and_the_month_still_counts() {
        let p = Period::of(0);
        let l = limits(10, 100, 0);
        assert!(check(&l.for_run(Some(50)), 20 * C, 0, &p).is_ok(), "raised");
        let lowered = check(&l.for_run(Some(5)), 6 * C, 0, &p).unwrap_err();
        assert_eq!(lowered.scope, BudgetScope::Run);
        assert!(
            check(&l.for_run(Some(0)), 99 * C, 0, &p).is_ok(),
            "0 is no limit"
        );
        let month = check(&l.for_run(Some(0)), 0, 100 * C, &p).unwrap_err();
        assert_eq!(month.scope, BudgetScope::Month);
        assert!(
            check(&l.for_run(None), 10 * C, 0, &p).is_err(),
            "the config's"
        );
    }

    #[test]
    fn warnings_fire_once_when_crossed() {
        let p = Period::of(0);
        let l = limits(100, 5000, 4000);
        let w = warnings_crossed(&l, (70 * C, 85 * C), (3990 * C, 4005 * C), &p);
        assert_eq!(
            w.iter().map(|n| n.scope).collect::<Vec<_>>(),
            vec![BudgetScope::Run, BudgetScope::Month]
        );
        assert!(warnings_crossed(&l, (85 * C, 90 * C), (4005 * C, 4010 * C), &p).is_empty());
        // Jumping straight past the limit is an exceeded, not a warning.
        assert!(warnings_crossed(&l, (0, 150 * C), (0, 0), &p).is_empty());
    }

    #[test]
    fn amounts_read_as_dollars_and_json_cents() {
        assert_eq!(dollars(70 * C), "$0.70");
        assert_eq!(dollars(C / 2), "$0.0050");
        assert_eq!(cents_number(70 * C).to_string(), "70");
        assert_eq!(cents_number(C / 4).to_string(), "0.25");
    }
}
