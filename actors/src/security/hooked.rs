//! What the run's hooks decided about a call, as the gate takes it. A `PreToolUse` deny
//! refuses the call; an ask has a person asked whatever the policy says (a policy's deny
//! holds); an allow lets through a call the policy would ask about, never one it denies, nor a
//! T4 call, nor one a crash left in doubt: a hook speaks for the person, not over the policy.
//! A `PermissionRequest` hook answers in the person's place. A call a crash cut off after its
//! hooks decided is decided again from the audit, its hooks not asked twice.

use crate::hooks::Fired;
use crate::ids::CallId;
use crate::message::ToolCall;
use crate::store::AuditRecord;
use crate::tools::{SafetyTier, ToolContext};
use ryvos_protocol::hook::{HookDecision, HookEvent, HookVerdict};

/// What the `PreToolUse` hooks' decision `hooked` does to the gate's rule for a call of
/// `tier` (`in_doubt` after a crash): `Some(verdict)` where it changes it.
pub(super) fn overrule(hooked: &Fired, tier: SafetyTier, in_doubt: bool) -> Option<HookVerdict> {
    match hooked.decided() {
        Some(HookVerdict::Allow) if tier == SafetyTier::T4 || in_doubt => None,
        // A hook that stops the run refuses the call it was asked about.
        Some(HookVerdict::Deny | HookVerdict::Stop) => Some(HookVerdict::Deny),
        Some(verdict @ (HookVerdict::Ask | HookVerdict::Allow)) => Some(verdict),
        _ => None,
    }
}

/// What the model is told of a call a hook denied.
pub(super) fn denial(hooked: &Fired) -> String {
    format!(
        "denied: a PreToolUse hook refused this call: {}",
        hooked.reason_or(HookEvent::PreToolUse)
    )
}

/// The `PreToolUse` decisions `audit` holds about `call`, asked before a crash cut it off.
pub(crate) fn recorded(audit: &[AuditRecord], call: &CallId) -> Vec<HookDecision> {
    // The latest run that made a call of this id made the one cut off (a model may use an
    // id again in a later run).
    let about_call = || audit.iter().filter(|r| &r.call_id == call);
    let Some(run) = about_call().next_back().map(|r| &r.run_id) else {
        return Vec::new();
    };
    (about_call().filter(|r| &r.run_id == run))
        .flat_map(|r| r.hooks.iter())
        .filter(|d| d.event == HookEvent::PreToolUse)
        .cloned()
        .collect()
}

/// The input a call `record` let through ran with, where its hooks changed the model's.
pub(crate) fn input_that_ran(record: &AuditRecord) -> Option<serde_json::Value> {
    (record.hooks.iter())
        .filter(|d| d.event == HookEvent::PreToolUse && d.verdict != HookVerdict::Deny)
        .find_map(|d| d.updated_input.clone())
}

/// The answer `PermissionRequest` hooks give in a person's place, if one does; it goes on
/// `record`.
pub(super) async fn answered_by_hooks(
    call: &ToolCall,
    input: &serde_json::Value,
    ctx: &ToolContext,
    record: &mut AuditRecord,
) -> Option<Result<(), super::Refused>> {
    let fired = ctx.hooks.permission(call, input).await;
    record.hooks.extend(fired.decisions.iter().cloned());
    let allowed = match fired.decided() {
        // A hook speaks for the person, but never over the policy's word on a T4 call.
        Some(HookVerdict::Allow) if record.tier == SafetyTier::T4 => return None,
        Some(HookVerdict::Allow) => true,
        Some(HookVerdict::Deny | HookVerdict::Stop) => false,
        _ => return None,
    };
    let reason = fired.reason_or(HookEvent::PermissionRequest);
    record.allowed = allowed;
    record.decided_by = "hook".into();
    record.reason = Some(reason.clone());
    Some(match allowed {
        true => Ok(()),
        false => Err(super::Refused::Denied(format!(
            "denied: a PermissionRequest hook denied this call: {reason}"
        ))),
    })
}
