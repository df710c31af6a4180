//! The audit's record of a call a crash cut off that was checked and found done: it is not
//! run again, and the audit says why no decision let it run this time.

use super::gate::Gate;
use crate::event::RunEvents;
use crate::message::ToolCall;
use crate::store::{now_ms, AuditRecord, Write, WriteBatch};
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
            at_ms: now_ms(),
            session_id: ctx.session_id.clone(),
            run_id: ctx.run_id.clone(),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            input: crate::text::truncate(&call.arguments, super::gate::AUDIT_INPUT_BYTES),
            tier,
            reasons: Vec::new(),
            allowed: false,
            decided_by: "reconciled".into(),
            reason: Some(
                "cut off by a crash; its effect was found in place, so it was not run again".into(),
            ),
            request_id: None,
            node: Some(self.node.to_string()),
        };
        let batch = WriteBatch::of(ctx.session_id.clone(), [Write::Audit(record)]);
        self.record_detached(batch, events);
    }
}
