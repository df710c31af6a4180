//! What hooks said about a call outside the gate's own decision, on the audit: after the call
//! ran (`PostToolUse`, `PostToolUseFailure`), or about an input the gate never saw.

use super::gate::Gate;
use crate::event::RunEvents;
use crate::message::ToolCall;
use crate::store::{AuditRecord, Write, WriteBatch};
use crate::tools::{SafetyTier, ToolContext};

impl Gate {
    /// Puts what hooks said about `call` outside the gate's own decision (after it ran, or a
    /// changed input it refused: `allowed` false) on the audit, with the next commit.
    pub(crate) fn record_hooks(
        &self,
        call: &ToolCall,
        ctx: &ToolContext,
        events: &RunEvents,
        (hooks, allowed): (Vec<ryvos_protocol::hook::HookDecision>, bool),
    ) {
        let record = AuditRecord {
            allowed,
            decided_by: "hook".into(),
            hooks,
            ..self.audit_record(call, SafetyTier::T0, Vec::new(), ctx)
        };
        self.record_detached(
            WriteBatch::of(ctx.session_id.clone(), [Write::Audit(record)]),
            events,
        );
    }
}
