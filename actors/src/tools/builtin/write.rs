//! `write {path, content}`: creates or replaces a file.

use super::{blocking, found_done, open_checked, str_arg};
use crate::tools::{Effect, SafetyTier, Tool, ToolContext, ToolError};
use crate::workspace::Access;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::io::Write as _;

/// Writes a whole file.
pub struct Write;

#[async_trait]
impl Tool for Write {
    fn name(&self) -> &str {
        "write"
    }

    fn description(&self) -> &str {
        "Create a file in the workspace, or replace its whole content. Missing parent \
         directories are created. To change part of a file, use edit."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "content": {"type": "string", "description": "The file's new content."}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        })
    }

    fn tier(&self) -> SafetyTier {
        SafetyTier::T2
    }

    fn effect(&self, _input: &Value) -> Effect {
        Effect::Reconcilable
    }

    /// Done when the file holds the content the call meant to write.
    async fn reconcile(
        &self,
        input: &Value,
        ctx: &ToolContext,
    ) -> Result<Option<String>, ToolError> {
        let (content, shown) = (str_arg(input, "content"), str_arg(input, "path"));
        let said = || {
            let bytes = content.len();
            format!("wrote {bytes} bytes to {shown} (found written after a restart)")
        };
        found_done(input, ctx, |now| now == content, said).await
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let path = ctx.workspace.resolve(str_arg(&input, "path"))?;
        if let Some(why) = ctx.sandbox.file_rules().refuses_write(&path) {
            return Err(ToolError::Denied(why));
        }
        let content = str_arg(&input, "content").to_owned();
        let shown = str_arg(&input, "path").to_owned();
        if let Some(editor) = &ctx.editor {
            if editor
                .write(&path, &content)
                .await
                .map_err(ToolError::Execution)?
            {
                return Ok(format!(
                    "wrote {} bytes to {shown} (in the editor)",
                    content.len()
                ));
            }
        }
        let workspace = ctx.workspace.clone();
        let rules = ctx.sandbox.file_rules();
        blocking(move || {
            open_checked(&workspace, &rules, &path, Access::Write, &shown)?
                .write_all(content.as_bytes())
                .map_err(|e| ToolError::Execution(format!("cannot write '{shown}': {e}")))?;
            Ok(format!("wrote {} bytes to {shown}", content.len()))
        })
        .await
    }
}
