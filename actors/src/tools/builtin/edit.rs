//! `edit {path, old_string, new_string}`: replaces one exact occurrence in a file.

use super::{blocking, found_done, open_checked, read_checked, str_arg};
use crate::tools::{Effect, SafetyTier, Tool, ToolContext, ToolError};
use crate::workspace::Access;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::io::Write;

/// Replaces text in a file.
pub struct Edit;

#[async_trait]
impl Tool for Edit {
    fn name(&self) -> &str {
        "edit"
    }

    fn description(&self) -> &str {
        "Replace text in a workspace file. old_string must appear exactly once in the file \
         (include surrounding lines to make it unique); it is replaced by new_string."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "old_string": {"type": "string", "minLength": 1, "description": "The exact text to replace."},
                "new_string": {"type": "string", "description": "The text to put in its place."}
            },
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": false
        })
    }

    fn tier(&self) -> SafetyTier {
        SafetyTier::T2
    }

    fn effect(&self, _input: &Value) -> Effect {
        Effect::Reconcilable
    }

    /// Done when the file shows the replacement made: the new text once, and the old no
    /// more often than the new text itself holds it.
    async fn reconcile(
        &self,
        input: &Value,
        ctx: &ToolContext,
    ) -> Result<Option<String>, ToolError> {
        let (old, new) = (str_arg(input, "old_string"), str_arg(input, "new_string"));
        let done = |now: &str| {
            now.matches(new).count() == 1 && now.matches(old).count() == new.matches(old).count()
        };
        let shown = str_arg(input, "path");
        let said = || format!("edited {shown}: replaced 1 occurrence (found made after a restart)");
        found_done(input, ctx, done, said).await
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let path = ctx.workspace.resolve(str_arg(&input, "path"))?;
        if let Some(why) = ctx.sandbox.file_rules().refuses_write(&path) {
            return Err(ToolError::Denied(why));
        }
        let old = str_arg(&input, "old_string").to_owned();
        let new = str_arg(&input, "new_string").to_owned();
        let shown = str_arg(&input, "path").to_owned();
        if let Some(editor) = &ctx.editor {
            if let Some(text) = editor.read(&path).await.map_err(ToolError::Execution)? {
                let edited = replaced(&text, &old, &new, &shown)?;
                if editor
                    .write(&path, &edited)
                    .await
                    .map_err(ToolError::Execution)?
                {
                    return Ok(format!(
                        "edited {shown}: replaced 1 occurrence (in the editor)"
                    ));
                }
            }
        }
        let workspace = ctx.workspace.clone();
        let rules = ctx.sandbox.file_rules();
        blocking(move || {
            let text = read_checked(&workspace, &rules, &path, &shown)?;
            let edited = replaced(&text, &old, &new, &shown)?;
            open_checked(&workspace, &rules, &path, Access::Write, &shown)?
                .write_all(edited.as_bytes())
                .map_err(|e| ToolError::Execution(format!("cannot write '{shown}': {e}")))?;
            Ok(format!("edited {shown}: replaced 1 occurrence"))
        })
        .await
    }
}

/// `text` with its one `old` replaced by `new`; an `old` found no times, or many, is refused.
fn replaced(text: &str, old: &str, new: &str, shown: &str) -> Result<String, ToolError> {
    match text.matches(old).count() {
        0 => Err(ToolError::Execution(format!(
            "old_string was not found in '{shown}'; read the file and copy the text \
             exactly, whitespace included"
        ))),
        1 => Ok(text.replacen(old, new, 1)),
        n => Err(ToolError::Execution(format!(
            "old_string appears {n} times in '{shown}'; include more surrounding text so that \
             it appears once"
        ))),
    }
}
