//! `read {path, offset?, limit?}`: a file's lines, numbered.

use super::{blocking, open_checked, str_arg};
use crate::tools::{SafetyTier, Tool, ToolContext, ToolError};
use crate::workspace::Access;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};

const DEFAULT_LIMIT: u64 = 2000;
const MAX_LINE_CHARS: usize = 2000;

/// Reads a text file.
pub struct Read;

#[async_trait]
impl Tool for Read {
    fn name(&self) -> &str {
        "read"
    }

    fn description(&self) -> &str {
        "Read a text file in the workspace. Lines come numbered from 1. Use offset (first line) \
         and limit (number of lines) to page through long files."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)."},
                "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read (default 2000)."}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    fn tier(&self) -> SafetyTier {
        SafetyTier::T0
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let path = ctx.workspace.resolve(str_arg(&input, "path"))?;
        if let Some(why) = ctx.sandbox.file_rules().refuses_read(&path) {
            return Err(ToolError::Denied(why));
        }
        let offset = input.get("offset").and_then(Value::as_u64).unwrap_or(1);
        let limit = input
            .get("limit")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_LIMIT);
        let shown = str_arg(&input, "path").to_owned();
        if let Some(editor) = ctx.editor.as_ref().filter(|_| !path.is_dir()) {
            if let Some(text) = editor.read(&path).await.map_err(ToolError::Execution)? {
                // As a file's lines are read: a trailing newline begins no other line.
                let lines = text
                    .split_terminator('\n')
                    .map(|l| Ok(l.as_bytes().to_vec()));
                return numbered(lines, offset, limit, &shown);
            }
        }
        let workspace = ctx.workspace.clone();
        let rules = ctx.sandbox.file_rules();
        blocking(move || {
            if path.is_dir() {
                return Err(ToolError::Execution(format!(
                    "'{shown}' is a directory; use glob to list what it holds"
                )));
            }
            let file = open_checked(&workspace, &rules, &path, Access::Read, &shown)?;
            numbered(BufReader::new(file).split(b'\n'), offset, limit, &shown)
        })
        .await
    }
}

/// `lines` numbered from 1, those from `offset` on, `limit` of them.
fn numbered(
    lines: impl Iterator<Item = std::io::Result<Vec<u8>>>,
    offset: u64,
    limit: u64,
    shown: &str,
) -> Result<String, ToolError> {
    let mut out = String::new();
    let mut total = 0u64;
    for (i, line) in lines.enumerate() {
        let number = i as u64 + 1;
        total = number;
        let line = line.map_err(|e| ToolError::Execution(format!("reading '{shown}': {e}")))?;
        if number < offset || number >= offset.saturating_add(limit) {
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches('\r');
        let mut chars = text.char_indices();
        let clipped = match chars.nth(MAX_LINE_CHARS) {
            Some((at, _)) => format!("{}… [line cut]", &text[..at]),
            None => text.to_owned(),
        };
        out.push_str(&format!("{number:>6}\t{clipped}\n"));
    }
    if total == 0 {
        return Ok(format!("'{shown}' is empty"));
    }
    if offset > total {
        return Err(ToolError::Execution(format!(
            "'{shown}' has {total} lines; offset {offset} is past its end"
        )));
    }
    let last = (offset + limit - 1).min(total);
    if last < total || offset > 1 {
        out.push_str(&format!("[lines {offset}-{last} of {total}]\n"));
    }
    Ok(out)
}
