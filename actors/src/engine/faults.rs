//! Test hooks: faults injected into the running engine (the `testing` feature only).

use super::Engine;
use crate::cost_ledger::CostLedgerMsg;
use crate::ids::SessionId;
use crate::root::RootMsg;

impl Engine {
    /// Test hook: makes one of the root's children panic.
    pub fn inject_panic(&self, kind: crate::root::ChildKind) {
        if self.root.cast(RootMsg::Panic(kind)).is_err() {
            tracing::warn!("fault injection: the root is down");
        }
    }

    /// Test hook: holds back the ledger's answers of one kind until the hold is released, as
    /// a slow ledger (a slow disk) would.
    pub fn hold_ledger(
        &self,
        answer: crate::cost_ledger::LedgerAnswer,
    ) -> crate::cost_ledger::LedgerHold {
        let (hold, held) = crate::cost_ledger::hold(answer);
        if self.slots.ledger.cast(CostLedgerMsg::Hold(held)).is_err() {
            tracing::warn!("holding the ledger: the ledger is down");
        }
        hold
    }

    /// Test hook: makes a session's actor panic (or, with `driver`, its run's driver);
    /// answers whether the session was live.
    pub async fn inject_session_panic(&self, session_id: SessionId, driver: bool) -> bool {
        self.sessions().inject_panic(session_id, driver).await
    }
}
