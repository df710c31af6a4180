//! `grep {pattern, path?}`: lines matching a regular expression.

use super::{blocking, open_checked, str_arg};
use crate::tools::{SafetyTier, Tool, ToolContext, ToolError};
use crate::workspace::Access;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};

const MAX_MATCHES: usize = 500;
const MAX_LINE_CHARS: usize = 300;

/// Searches file contents.
pub struct Grep;

#[async_trait]
impl Tool for Grep {
    fn name(&self) -> &str {
        "grep"
    }

    fn description(&self) -> &str {
        "Search workspace files for lines matching a regular expression (Rust regex syntax). \
         Gives path:line: text for each match. path limits the search to a file or directory."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "minLength": 1, "description": "Regular expression."},
                "path": {"type": "string", "description": "File or directory to search (default: the whole workspace)."}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    fn tier(&self) -> SafetyTier {
        SafetyTier::T0
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let regex = regex::Regex::new(str_arg(&input, "pattern"))
            .map_err(|e| ToolError::Execution(format!("invalid regular expression: {e}")))?;
        let start = match input.get("path").and_then(Value::as_str) {
            Some(p) if !p.is_empty() => ctx.workspace.resolve(p)?,
            _ => ctx.workspace.root().to_path_buf(),
        };
        let workspace = ctx.workspace.clone();
        let rules = ctx.sandbox.file_rules();
        if let Some(why) = rules.refuses_read(&start) {
            return Err(ToolError::Denied(why));
        }
        blocking(move || {
            let mut out = String::new();
            let mut matches = 0usize;
            'files: for entry in ignore::WalkBuilder::new(&start).build().flatten() {
                if !entry.file_type().is_some_and(|t| t.is_file())
                    || rules.refuses_read(entry.path()).is_some()
                {
                    continue;
                }
                let Ok(file) = open_checked(&workspace, &rules, entry.path(), Access::Read, "")
                else {
                    continue;
                };
                let mut reader = BufReader::new(file);
                if looks_binary(&mut reader) {
                    continue;
                }
                let shown = workspace.display(entry.path()).to_string();
                for (i, line) in reader.split(b'\n').enumerate() {
                    let Ok(line) = line else { continue 'files };
                    let text = String::from_utf8_lossy(&line);
                    if regex.is_match(&text) {
                        matches += 1;
                        if matches > MAX_MATCHES {
                            continue;
                        }
                        let text: String = text.trim_end().chars().take(MAX_LINE_CHARS).collect();
                        out.push_str(&format!("{shown}:{}: {text}\n", i + 1));
                    }
                }
            }
            if matches == 0 {
                return Ok("no matches".into());
            }
            if matches > MAX_MATCHES {
                out.push_str(&format!(
                    "[{MAX_MATCHES} of {matches} matches shown; narrow the pattern or path]\n"
                ));
            }
            Ok(out)
        })
        .await
    }
}

/// A NUL byte in the first block means a binary file, as grep decides.
fn looks_binary(reader: &mut BufReader<std::fs::File>) -> bool {
    match reader.fill_buf() {
        Ok(head) => head.contains(&0),
        Err(_) => true,
    }
}
