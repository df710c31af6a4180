//! The audit's record of a call a crash cut off that was checked and found done: it is not
//! run again, and the audit says why no decision let it run this time.

use super::gate::Gate;
use crate::event::RunEvents;
use crate::message::ToolCall;
use crate::store::{AuditRecord, Write, WriteBatch};
use crate::tools::{SafetyTier, ToolContext};

impl Gate {
    /// Puts on record (with the run's next commit) that `call` had taken effect before the
    /// crash and is recorded as done.
    pub(crate) fn record_found_done(
        &self,
        call: &ToolCall,
        tier: SafetyTier,
        ctx: &ToolContext,
        events: &RunEvents,
    ) {
        let record = AuditRecord {
            decided_by: "reconciled".into(),
            reason: Some(
                "cut off by a crash; its effect was found in place, so it was not run again".into(),
            ),
            ..self.audit_record(call, tier, Vec::new(), ctx)
        };
        let batch = WriteBatch::of(ctx.session_id.clone(), [Write::Audit(record)]);
        self.record_detached(batch, events);
    }
}
