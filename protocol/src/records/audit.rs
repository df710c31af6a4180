//! The security gate's decisions and the approval requests it keeps.

pub use crate::asked::ApprovalKind;
use crate::ids::{CallId, RunId, SessionId};
use crate::tier::SafetyTier;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One decision of the security gate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
// Closed in the schema: a client may rely on every field being documented.
#[schemars(deny_unknown_fields)]
pub struct AuditRecord {
    pub at_ms: u64,
    pub session_id: SessionId,
    pub run_id: RunId,
    pub call_id: CallId,
    pub tool: String,
    /// The call's arguments as the model gave them (long ones clipped).
    pub input: String,
    pub tier: SafetyTier,
    /// What raised the tier above the tool's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    pub allowed: bool,
    /// `policy`, `auto_approve`, `command_allowlist`, who answered an approval request,
    /// `unanswered` (it timed out), or `run_ended`.
    pub decided_by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The runtime that decided, and so ran the call if it was allowed: its node name on a
    /// shared store, else its process (`pid 4242`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// What hooks decided about the call (`PreToolUse`, `PermissionRequest`) before the gate
    /// did; for a step that is no call (a prompt, a run's end), `tool` names the event and
    /// `call_id` is empty. A call a crash cut off is decided again from these, its hooks not
    /// asked twice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<crate::hook::HookDecision>,
}

/// A person's answer to an approval request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Answer {
    pub approved: bool,
    pub reason: Option<String>,
    /// Who answered (`ryvos approve`, a host application, …), for the audit.
    pub by: String,
    /// Approve the same call (the same tool; for `bash`, the same command) for the rest of the
    /// session without asking again. Never for a T4 call.
    pub always: bool,
}

/// A request for a person's approval, as listed to people and kept in the store while its run
/// is paused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
// Closed in the schema: a client may rely on every field being documented.
#[schemars(deny_unknown_fields)]
pub struct PendingApproval {
    pub request_id: String,
    pub session_id: SessionId,
    pub run_id: RunId,
    pub call_id: CallId,
    pub tool: String,
    pub input: serde_json::Value,
    pub tier: SafetyTier,
    pub asked_at_ms: u64,
    /// The run paused (an interrupt, a daemon shutdown) while this call waited. The request
    /// stays answerable; the session's next run takes the answer, or asks again.
    #[serde(default)]
    pub paused: bool,
    /// The answer given while the run was paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answer>,
    /// What is asked: whether the call may run (`call`, left out), or whether a call a crash
    /// cut off, which may or may not have taken effect, may run again (`in_doubt`).
    #[serde(default, skip_serializing_if = "ApprovalKind::is_call")]
    pub kind: ApprovalKind,
    /// For a call in doubt: when it was let through before the crash (ms since the epoch)…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<u64>,
    /// …and by which runtime (as [`AuditRecord::node`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_on: Option<String>,
}
