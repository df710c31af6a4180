//! `memory_write {content, tags?}` and `memory_search {query, k?}`.

use super::Memory;
use crate::tools::{SafetyTier, Tool, ToolContext, ToolError};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::Arc;

/// The most results a search returns.
const MAX_K: u64 = 20;
const DEFAULT_K: u64 = 5;

/// `tools` with the memory tools, unless the host brought its own of the same name.
pub(crate) fn with_memory_tools(
    mut tools: Vec<Arc<dyn Tool>>,
    memory: &Memory,
) -> Vec<Arc<dyn Tool>> {
    let builtin: [Arc<dyn Tool>; 2] = [
        Arc::new(MemoryWrite(memory.clone())),
        Arc::new(MemorySearch(memory.clone())),
    ];
    for tool in builtin {
        if !tools.iter().any(|t| t.name() == tool.name()) {
            tools.push(tool);
        }
    }
    tools
}

/// Saves a fact for later sessions.
pub(crate) struct MemoryWrite(pub Memory);

#[async_trait]
impl Tool for MemoryWrite {
    fn name(&self) -> &str {
        "memory_write"
    }

    fn description(&self) -> &str {
        "Save a fact worth remembering beyond this conversation (a decision, a path, a \
         preference, a result). One fact per call. Later sessions find it by its words."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "content": {"type": "string", "minLength": 1, "maxLength": 8000},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 16}
            },
            "required": ["content"],
            "additionalProperties": false
        })
    }

    fn tier(&self) -> SafetyTier {
        SafetyTier::T1
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let content = input["content"].as_str().unwrap_or_default();
        let tags = input["tags"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let (entry, degraded) = self
            .0
            .write(&ctx.session_id, content, tags)
            .await
            .map_err(|e| ToolError::Execution(format!("the memory could not be stored: {e}")))?;
        Ok(match degraded {
            Some(note) => format!("saved as {}; {note}", entry.id),
            None => format!("saved as {}", entry.id),
        })
    }
}

/// Finds saved facts.
pub(crate) struct MemorySearch(pub Memory);

#[async_trait]
impl Tool for MemorySearch {
    fn name(&self) -> &str {
        "memory_search"
    }

    fn description(&self) -> &str {
        "Search the facts saved with memory_write (in any session) by keywords; the best \
         matches come first."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1},
                "k": {"type": "integer", "minimum": 1, "maximum": MAX_K}
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }

    fn tier(&self) -> SafetyTier {
        SafetyTier::T0
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        let query = input["query"].as_str().unwrap_or_default();
        let k = input["k"].as_u64().unwrap_or(DEFAULT_K).min(MAX_K) as usize;
        let found = self
            .0
            .search(query, k, f64::MIN_POSITIVE)
            .await
            .map_err(|e| ToolError::Execution(format!("the memory could not be searched: {e}")))?;
        let mut out: Vec<String> = found
            .hits
            .iter()
            .map(|h| format!("[{:.2}] {} ({})", h.score, h.entry.content, h.entry.id))
            .collect();
        if out.is_empty() {
            out.push(format!("no saved fact matches '{query}'"));
        }
        if let Some(note) = found.degraded {
            out.push(format!("note: {note}"));
        }
        Ok(out.join("\n"))
    }
}
