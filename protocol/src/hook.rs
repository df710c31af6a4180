//! Hooks: a person's programs run at each step of a run, in Claude Code's contract
//! (docs/hooks.md). What they decide is published and kept in the audit.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The steps hooks run at, by Claude Code's names.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum HookEvent {
    /// A run begins (its context goes into the run's system prompt).
    SessionStart,
    /// A run's prompt, before the model sees it (may block it, or add context).
    UserPromptSubmit,
    /// A tool call, before the security gate (may deny, ask, allow or change its input).
    PreToolUse,
    /// A tool call that succeeded.
    PostToolUse,
    /// A tool call that failed.
    PostToolUseFailure,
    /// A call the gate would ask a person about (may answer in the person's place).
    PermissionRequest,
    /// Before the context is compacted.
    PreCompact,
    /// After the context was compacted.
    PostCompact,
    /// A run about to end with the model's answer (may send it back to work, once).
    Stop,
    /// A run parked, to go on later.
    RunParked,
    /// A Director's step begins.
    SubagentStart,
    /// A Director's step is about to end with its answer (may send it back, once).
    SubagentStop,
    /// A run ended.
    SessionEnd,
}

impl HookEvent {
    /// Every event, in the order of a run.
    pub const ALL: [HookEvent; 13] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PermissionRequest,
        HookEvent::PostToolUse,
        HookEvent::PostToolUseFailure,
        HookEvent::PreCompact,
        HookEvent::PostCompact,
        HookEvent::Stop,
        HookEvent::RunParked,
        HookEvent::SubagentStart,
        HookEvent::SubagentStop,
        HookEvent::SessionEnd,
    ];

    /// Its name, as configs and hooks' input write it.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PostToolUseFailure => "PostToolUseFailure",
            HookEvent::PermissionRequest => "PermissionRequest",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::PostCompact => "PostCompact",
            HookEvent::Stop => "Stop",
            HookEvent::RunParked => "RunParked",
            HookEvent::SubagentStart => "SubagentStart",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::SessionEnd => "SessionEnd",
        }
    }

    /// The event named `name`, if there is one.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == name)
    }
}

impl std::fmt::Display for HookEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a hook decided about its step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HookVerdict {
    /// The call may run without asking a person (the gate's and the policy's denials hold).
    Allow,
    /// The call does not run; the reason goes to the model.
    Deny,
    /// A person is asked about the call, whatever the policy says.
    Ask,
    /// The step is refused: a prompt is not taken, a run is sent back to work, a result is
    /// flagged to the model.
    Block,
    /// The run stops (`"continue": false`).
    Stop,
    /// Nothing decided, but something given: context for the model, or a changed input.
    Context,
    /// The hook failed (an exit status other than 0 and 2, output that is not the contract's,
    /// a timeout); the step goes on as if it had not run.
    Failed,
}

impl HookVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            HookVerdict::Allow => "allow",
            HookVerdict::Deny => "deny",
            HookVerdict::Ask => "ask",
            HookVerdict::Block => "block",
            HookVerdict::Stop => "stop",
            HookVerdict::Context => "context",
            HookVerdict::Failed => "failed",
        }
    }
}

/// One hook's decision, as the audit keeps it with the step it was about.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct HookDecision {
    pub event: HookEvent,
    /// The hook: its command line or address (long ones clipped), and where it is configured.
    pub hook: String,
    pub verdict: HookVerdict,
    /// Why, as the hook said it (its `reason`, its stderr on exit 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The call's input as the hook changed it (`updatedInput`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_input: Option<serde_json::Value>,
    /// What it added for the model to read (`additionalContext`, or its stdout where that
    /// counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}
