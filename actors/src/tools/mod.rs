//! Tools: what the model can do.
//!
//! A [`Tool`] declares its name, description, JSON Schema and safety tier, and executes with
//! validated arguments inside a [`ToolContext`]. The [`ToolRegistry`] validates arguments before
//! anything runs; the [`tool_executor`](crate::tool_executor) runs calls and reports failures to the
//! model as tool results that start with their kind, so the loop always goes on.

pub mod builtin;
mod compact;
mod registry;

pub(crate) use crate::workspace::{Workspace, WorkspaceError};
pub(crate) use compact::compact_output;
pub(crate) use registry::RegistryError;
pub use registry::ToolRegistry;
pub use ryvos_protocol::effect::Effect;
pub(crate) use ryvos_protocol::tier::SafetyTier;

use crate::ids::{RunId, SessionId};
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

/// What a tool call may use.
#[derive(Clone)]
pub struct ToolContext {
    pub workspace: Workspace,
    pub session_id: SessionId,
    pub run_id: RunId,
    /// Cancelled when the run stops (timeout, cancel, shutdown); long tools should watch it.
    pub cancel: CancellationToken,
    /// Set when the run is to pause after its current step: calls not yet started wait for
    /// the next run instead.
    pub interrupt: crate::interrupt::Interrupter,
    /// Where every program a call starts runs: confined to the workspace, or refused.
    pub sandbox: crate::sandbox::RunSandbox,
    /// The editor the file tools read and write through, for a run an editor started.
    pub editor: Option<crate::editor::Editor>,
    /// The call being run, when a call is (a `command` criterion is none).
    pub call: Option<CallIdentity>,
    /// The run's hooks, asked before and after each call (none: nothing is asked).
    pub(crate) hooks: crate::hooks::RunHooks,
}

/// Which call a tool runs for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallIdentity {
    pub call_id: crate::ids::CallId,
    /// The same for this call across retries, restarts, continues and daemons: what the far
    /// side of an effect dedupes on (`RYVOS_IDEMPOTENCY_KEY`, MCP's `_meta.idempotencyKey`).
    pub idempotency_key: String,
}

impl CallIdentity {
    /// Call `call_id`, which the message stored as `seq` of `session` made.
    pub fn new(session: &SessionId, seq: u64, call_id: &crate::ids::CallId) -> Self {
        Self {
            call_id: call_id.clone(),
            idempotency_key: format!("{session}:{seq}:{call_id}"),
        }
    }
}

/// Why a tool call failed. Reported to the model as `execution_error: …` or `denied: …`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    #[error("execution_error: {0}")]
    Execution(String),
    #[error("denied: {0}")]
    Denied(String),
}

impl From<WorkspaceError> for ToolError {
    fn from(e: WorkspaceError) -> Self {
        match e {
            WorkspaceError::Escape { .. } => ToolError::Denied(e.to_string()),
            other => ToolError::Execution(other.to_string()),
        }
    }
}

/// A tool the model can call.
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    /// The name the model calls it by.
    fn name(&self) -> &str;
    /// What it does, for the model.
    fn description(&self) -> &str;
    /// JSON Schema of its arguments; checked before every call.
    fn parameters(&self) -> serde_json::Value;
    /// How much harm a call can do.
    fn tier(&self) -> SafetyTier;
    /// What a call with `input` may do, for its recovery if a crash cuts it off: by default
    /// read-only for a T0 tool, unsafe for any other.
    fn effect(&self, _input: &serde_json::Value) -> Effect {
        Effect::of_tier(self.tier())
    }

    /// For a [`Effect::Reconcilable`] tool: whether the call with `input` took effect
    /// already; the result to record for it if it did.
    async fn reconcile(
        &self,
        _input: &serde_json::Value,
        _ctx: &ToolContext,
    ) -> Result<Option<String>, ToolError> {
        Ok(None)
    }

    /// Runs the call. `input` has already been validated against [`Tool::parameters`].
    async fn execute(
        &self,
        input: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<String, ToolError>;
}
