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
    /// Runs the call. `input` has already been validated against [`Tool::parameters`].
    async fn execute(
        &self,
        input: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<String, ToolError>;
}
