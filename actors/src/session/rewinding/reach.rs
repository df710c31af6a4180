//! What a rewind cannot undo: the calls made after the point whose effects are not in the
//! workspace's files — an MCP tool's (unless read-only), and a command's where the sandbox
//! lets commands reach beyond the workspace (`writable_paths`, the network).

use crate::ids::CallId;
use crate::message::Message;
use crate::security::effect_of;
use crate::store::SessionHistory;
use crate::tools::{Effect, ToolRegistry};
use ryvos_protocol::records::RewindPoint;
use std::collections::HashSet;
use std::path::Path;

/// One line per call after `point` whose effects a rewind leaves in place.
pub(super) fn not_undone(
    stored: &SessionHistory,
    point: &RewindPoint,
    registry: &ToolRegistry,
    beyond: Option<&str>,
) -> Vec<String> {
    let workspace = point.workspace.as_ref().map(|m| Path::new(&m.workspace));
    // Copies of what was before the point (an earlier rewind's) were not made after it.
    let before: HashSet<&CallId> = stored
        .messages
        .iter()
        .filter(|m| (point.window_from..point.upto).contains(&m.seq))
        .flat_map(|m| m.message.tool_calls().iter().map(|c| &c.id))
        .collect();
    let mut lines = Vec::new();
    let after = stored.messages.iter().filter(|m| m.seq >= point.upto);
    for m in after {
        let Message::Assistant { tool_calls, .. } = m.message.as_ref() else {
            continue;
        };
        for call in tool_calls.iter().filter(|c| !before.contains(&c.id)) {
            let input = serde_json::from_str(&call.arguments).unwrap_or_default();
            let effect = match registry.get(&call.name) {
                Some(tool) => effect_of(tool.as_ref(), &input, workspace.unwrap_or(Path::new("/"))),
                None => Effect::Unsafe,
            };
            if effect == Effect::ReadOnly {
                continue;
            }
            let line = if call.name.contains("__") {
                format!(
                    "{} ({}): an MCP tool's call, outside Ryvos",
                    call.name, call.id
                )
            } else if call.name == "bash" {
                match beyond {
                    Some(reach) => format!(
                        "{} ({}): a command, which could reach {reach}",
                        call.name, call.id
                    ),
                    None => continue,
                }
            } else {
                continue;
            };
            lines.push(line);
        }
    }
    lines
}
