//! The built-in tools: read, write, edit, bash, glob, grep.

mod bash;
mod edit;
mod glob;
mod grep;
mod read;
mod write;

pub use bash::Bash;
pub use edit::Edit;
pub use glob::Glob;
pub use grep::Grep;
pub use read::Read;
pub use write::Write;

use super::{Tool, ToolError};
use std::sync::Arc;

/// Every built-in tool.
pub fn all() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(Read),
        Arc::new(Write),
        Arc::new(Edit),
        Arc::new(Bash),
        Arc::new(Glob),
        Arc::new(Grep),
    ]
}

/// The string argument `key` (present: the schema was checked).
fn str_arg<'a>(input: &'a serde_json::Value, key: &str) -> &'a str {
    input.get(key).and_then(|v| v.as_str()).unwrap_or_default()
}

/// Runs blocking file work off the async workers.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ToolError::Execution(format!("the tool's worker failed: {e}")))?
}
