//! What a call may do to the world, for its recovery after a crash: the tool's own effect
//! class, except that a call the gate reads as T0 (a `bash` command that only reads) is
//! read-only whatever its tool says.

use super::gate::classify_call;
use crate::tools::{Effect, Tool};
use std::path::Path;

/// The effect class of `tool` called with `input`, working in `workspace`.
pub(crate) fn effect_of(tool: &dyn Tool, input: &serde_json::Value, workspace: &Path) -> Effect {
    match Effect::of_tier(classify_call(tool, input, workspace).tier) {
        Effect::ReadOnly => Effect::ReadOnly,
        _ => tool.effect(input),
    }
}
