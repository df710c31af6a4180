//! `glob {pattern}`: files in the workspace whose path matches a pattern.

use super::{blocking, str_arg};
use crate::tools::{SafetyTier, Tool, ToolContext, ToolError};
use async_trait::async_trait;
use serde_json::{json, Value};

const MAX_RESULTS: usize = 1000;

/// Finds files by pattern.
pub struct Glob;

#[async_trait]
impl Tool for Glob {
    fn name(&self) -> &str {
        "glob"
    }

    fn description(&self) -> &str {
        "List workspace files whose path matches a glob pattern, such as '**/*.rs' or \
         'src/*.toml'. Paths are relative to the workspace; .gitignore'd and hidden files are \
         skipped."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "minLength": 1, "description": "Glob pattern, relative to the workspace."}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    fn tier(&self) -> SafetyTier {
        SafetyTier::T0
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let pattern = str_arg(&input, "pattern")
            .trim_start_matches("./")
            .to_owned();
        if pattern.starts_with('/') || pattern.split('/').any(|part| part == "..") {
            return Err(ToolError::Denied(format!(
                "the pattern '{pattern}' reaches outside the workspace; use a pattern relative \
                 to it"
            )));
        }
        let matcher = globset::GlobBuilder::new(&pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolError::Execution(format!("invalid glob pattern: {e}")))?
            .compile_matcher();
        let root = ctx.workspace.root().to_path_buf();
        let rules = ctx.sandbox.file_rules();
        blocking(move || {
            let mut found = Vec::new();
            for entry in ignore::WalkBuilder::new(&root).build().flatten() {
                let Ok(relative) = entry.path().strip_prefix(&root) else {
                    continue;
                };
                if entry.file_type().is_some_and(|t| t.is_file())
                    && matcher.is_match(relative)
                    && rules.refuses_read(entry.path()).is_none()
                {
                    found.push(relative.display().to_string());
                }
            }
            found.sort();
            let total = found.len();
            if total == 0 {
                return Ok(format!("no files match '{pattern}'"));
            }
            found.truncate(MAX_RESULTS);
            let mut out = found.join("\n");
            if total > MAX_RESULTS {
                out.push_str(&format!(
                    "\n[{MAX_RESULTS} of {total} matches shown; use a narrower pattern]"
                ));
            }
            Ok(out)
        })
        .await
    }
}
