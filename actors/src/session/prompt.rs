//! The system prompt the engine gives every run: the runtime's principles, then the context
//! layers found in the caller's directory, the workspace and `$RYVOS_HOME`.

use crate::context::layers::{self, Assembled};
use crate::memory::{Hit, Memory};
use crate::tools::Workspace;
use std::path::{Path, PathBuf};

/// Assembles a run's system prompt; reads files, so it runs off the async workers.
pub(super) async fn assemble(
    workspace: &Workspace,
    caller_dir: Option<&Path>,
    home: &Path,
    recalled: &[Hit],
) -> Assembled {
    let principles = system_prompt(workspace);
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in caller_dir.into_iter().chain([workspace.root(), home]) {
        if !dirs.iter().any(|d| d == dir) {
            dirs.push(dir.to_path_buf());
        }
    }
    let today = crate::cost_ledger::Period::of(crate::store::now_ms()).day;
    let daily_log = home.join("logs").join("daily").join(format!("{today}.md"));
    let built =
        tokio::task::spawn_blocking(move || layers::assemble(&principles, &dirs, &daily_log)).await;
    let mut built = built.unwrap_or_else(|e| Assembled {
        prompt: String::new(),
        warnings: vec![format!("the context files could not be read: {e}")],
    });
    // Layer 2.5: what the memory holds about this message.
    if !recalled.is_empty() {
        built
            .prompt
            .push_str("\n\n## Recalled memories (saved in earlier sessions)\n");
        for hit in recalled {
            built
                .prompt
                .push_str(&format!("\n- {}", hit.entry.content.trim()));
        }
    }
    built
}

/// How many memories are recalled into a run's prompt, at most.
const RECALL_K: usize = 3;

/// The memories relevant to `message`, never the message itself; a failed search is a warning.
pub(super) async fn recall(memory: &Memory, message: &str, warnings: &mut Vec<String>) -> Vec<Hit> {
    match memory
        .search(message, RECALL_K + 1, memory.relevance_floor())
        .await
    {
        Ok(found) => {
            warnings.extend(found.degraded);
            found
                .hits
                .into_iter()
                .filter(|h| !h.entry.content.trim().eq_ignore_ascii_case(message.trim()))
                .take(RECALL_K)
                .collect()
        }
        Err(e) => {
            warnings.push(format!("memories could not be recalled: {e}"));
            Vec::new()
        }
    }
}

/// The runtime's own instructions: who the agent is, where it works, how a run ends.
fn system_prompt(workspace: &Workspace) -> String {
    format!(
        "You are Ryvos, an autonomous agent. You work in the directory {}; file paths are \
         relative to it. Use the tools to inspect files, change them and run commands; their \
         results come back to you. A tool result that starts with unknown_tool, \
         validation_error, execution_error or denied means the call failed: read why and \
         adjust. Be honest about what you did and did not verify. When the task is done, reply \
         with your final answer and no tool calls.",
        workspace.root().display()
    )
}
