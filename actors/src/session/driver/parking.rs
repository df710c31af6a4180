//! How a run parks: at its per-run budget or the month's limit (and, with `[agent.judge]
//! park_on_escalate`, when it escalates) it does not end but parks,
//! its turns stored, holding nothing, until it is continued (the same run, its totals kept)
//! or stopped. `[budget] on_limit = "stop"` (a run's `--no-park`) ends it instead.

use super::Driver;
use crate::config::OnLimit;
use crate::cost_ledger::{dollars, MICROCENTS_PER_CENT};
use crate::event::{ParkReason, RunStatus};
use crate::session::run::Ending;
use crate::session::siblings::Refusal;

impl Driver {
    /// How the run stops at `refusal`: parked, where it may park and is let; else ended as
    /// the refusal says.
    pub(super) fn refused(&mut self, refusal: Refusal) -> Ending {
        let on_limit =
            (self.run.settings().on_limit).unwrap_or(self.session.services.budget.on_limit);
        match refusal.parks.filter(|_| on_limit == OnLimit::Park) {
            Some(reason) => self.park(reason, &refusal.reason),
            None => self.end(refusal.status, refusal.reason),
        }
    }

    /// Parks the run for `reason` (`why` in words), saying why and what continues it.
    pub(super) fn park(&mut self, reason: ParkReason, why: &str) -> Ending {
        self.run.park_for(reason);
        let run = self.run.id();
        let spent = dollars(self.run.spent().cost_microcents());
        let message = match reason {
            ParkReason::BudgetRun => {
                let limit = (self.run.limits().per_run_limit_cents())
                    .unwrap_or(self.session.services.budget.per_run_limit_cents);
                let budget = dollars(limit.saturating_mul(MICROCENTS_PER_CENT));
                format!(
                    "the run has spent {spent}, which reaches its budget of {budget}; it parked \
                     before its next model call, its turns stored. `ryvos continue {run} \
                     --budget-cents N` (N cents, above {limit}) goes on; `ryvos stop {run}` ends \
                     it"
                )
            }
            ParkReason::Escalated => format!(
                "{why}; the run parked for a person to look, its turns stored. `ryvos continue \
                 {run}` sends it back to work (the model is told a person reviewed it), `ryvos \
                 stop {run}` ends it escalated"
            ),
            ParkReason::BudgetMonth => format!(
                "this month's spending reached budget.monthly_limit_cents; the run (spent \
                 {spent}) parked before its next model call, its turns stored. Once the month \
                 turns or the limit is raised, `ryvos continue {run}` goes on; `ryvos stop \
                 {run}` ends it"
            ),
        };
        self.end(RunStatus::Parked, message)
    }
}
