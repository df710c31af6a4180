//! The CostLedger's messages: how usage will be priced and budgets checked.
//!
//! The CostLedgerActor is not started yet: runs report token usage but no price
//! (`cost_cents` is `null`). These types fix its interface for the loop.

use crate::ids::{RunId, SessionId};
use crate::provider::Usage;
use ractor::RpcReplyPort;

/// Whether a run may make its next model call.
#[derive(Clone, Debug, PartialEq)]
pub enum BudgetCheck {
    Within,
    /// Past a warning threshold: go on, and say so.
    Warning {
        scope: String,
        spent_cents: f64,
        limit_cents: f64,
    },
    /// Past a limit: stop before the next model call.
    Exceeded {
        scope: String,
        spent_cents: f64,
        limit_cents: f64,
    },
}

/// Messages of the CostLedgerActor.
pub enum CostLedgerMsg {
    /// Price and record one model call's usage.
    Record {
        session_id: SessionId,
        run_id: RunId,
        model: String,
        usage: Usage,
        estimated: bool,
    },
    /// May the run make another model call?
    Check {
        run_id: RunId,
        reply: RpcReplyPort<BudgetCheck>,
    },
}
