//! The cost ledger: what every model call cost, totalled per run, session, day and month, and
//! the budgets checked against those totals.
//!
//! Each call's usage (the provider's, or the tokenizer's estimate, marked as such) is priced
//! from a [`PriceBook`] and added to four totals (`run:`, `session:`, `day:`, `month:` keys),
//! which the [`CostLedgerActor`] keeps in memory and adds to the store's through its writer,
//! and to the model's total for the day (`model-day:DAY:MODEL`, for the console's chart), which
//! it only adds to the store's.
//! Before every model call the session asks the ledger whether the run and the month are
//! within their limits; a restarted ledger reads its totals back from the store.
//!
//! Daemons sharing a store each add their own spending to the same totals, and a ledger with
//! a monthly limit reads the month's total back at most a second before a call it allows. So
//! the month can overshoot its limit by at most one model call per run in flight on every
//! daemon, plus what the other daemons spent in that last second.

mod actor;
mod budget;
#[cfg(feature = "testing")]
mod hold;
mod period;
mod pricing;
mod report;

pub(crate) use actor::{run_key, CostLedgerActor, CostLedgerArgs};
pub(crate) use budget::{dollars, BudgetNotice, MICROCENTS_PER_CENT};
#[cfg(feature = "testing")]
pub(crate) use hold::hold;
#[cfg(feature = "testing")]
pub use hold::{LedgerAnswer, LedgerHold};
pub use period::Period;
pub(crate) use pricing::PriceSource;
pub(crate) use report::cost_report;

use crate::config::Pricing;
use crate::ids::{RunId, SessionId};
use crate::provider::Usage;
use crate::store::{CostTotals, StoreError};
use ractor::RpcReplyPort;

/// One model call's usage, as the session reports it.
#[derive(Clone, Debug)]
pub(crate) struct UsageReport {
    pub session_id: SessionId,
    pub run_id: RunId,
    /// The call's number within its run, from 1: a report repeated after a ledger restart is
    /// recognised and not counted twice.
    pub call: u32,
    pub model: String,
    pub usage: Usage,
    /// True when the usage is the tokenizer's estimate.
    pub estimated: bool,
    /// The model is served on this machine: free unless priced.
    pub served_locally: bool,
    /// The run's own per-run limit in cents, when it set one.
    pub run_limit_cents: Option<u64>,
}

/// What recording a call found.
#[derive(Clone, Debug)]
pub(crate) struct Receipt {
    /// The call's cost, in millionths of a cent.
    pub call_microcents: u64,
    /// The run's totals with this call.
    pub run: CostTotals,
    /// The price applied, and where it came from.
    pub price: Pricing,
    pub price_source: PriceSource,
    /// Warning thresholds this call crossed.
    pub warnings: Vec<BudgetNotice>,
    /// Whether the run may make its next call, judged with this call counted: the check
    /// before the next call, without another round trip.
    pub next_call: Authorization,
    /// An earlier write of the ledger's totals failed (they are written again with this one).
    pub store_error: Option<StoreError>,
}

/// Whether a run may make its next model call.
#[derive(Clone, Debug)]
pub(crate) enum Authorization {
    Allowed,
    /// A limit is reached.
    Refused(BudgetNotice),
    /// The totals could not be read: refused, since spending cannot be checked.
    Unverifiable(StoreError),
}

/// Messages of the [`CostLedgerActor`].
pub(crate) enum CostLedgerMsg {
    /// May this run make another model call?
    Authorize {
        run_id: RunId,
        /// The run's own per-run limit in cents, when it set one.
        run_limit_cents: Option<u64>,
        reply: RpcReplyPort<Authorization>,
    },
    /// Price and record one call's usage.
    Record {
        report: UsageReport,
        reply: RpcReplyPort<Result<Receipt, StoreError>>,
    },
    /// The run ended: its totals need not stay in memory.
    RunEnded {
        session_id: SessionId,
        run_id: RunId,
    },
    /// A write adding these amounts to these keys' totals failed; they are added with the
    /// next one.
    CommitFailed {
        adds: Vec<(String, CostTotals)>,
        error: StoreError,
    },
    /// Test hook: panic inside the handler.
    #[cfg(feature = "testing")]
    Panic,
    /// Test hook: hold back the answers of one kind until released.
    #[cfg(feature = "testing")]
    Hold(hold::Held),
}
