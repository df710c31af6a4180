//! What a `write` or `edit` waiting for approval would change, as a unified diff of the file
//! as it is on disk against the file as the call would leave it: the person asked sees the
//! change, not only its arguments.

use crate::style::{paint, FAIL, QUIET, TOOL};
use anstyle::AnsiColor;
use serde_json::Value;
use std::path::Path;

/// The most lines of a diff shown; the rest are counted.
const MAX_LINES: usize = 40;

/// The diff of what `tool` called with `input` would change in `workspace`; `None` for any
/// other tool, or arguments that name no file.
pub fn of(tool: &str, input: &Value, workspace: Option<&Path>) -> Option<String> {
    let path = input["path"].as_str()?;
    let on_disk = workspace
        .and_then(|w| std::fs::read_to_string(w.join(path)).ok())
        .unwrap_or_default();
    let after = match tool {
        "write" => input["content"].as_str()?.to_owned(),
        "edit" => {
            let (old, new) = (input["old_string"].as_str()?, input["new_string"].as_str()?);
            match input["replace_all"].as_bool() == Some(true) {
                true => on_disk.replace(old, new),
                false => on_disk.replacen(old, new, 1),
            }
        }
        _ => return None,
    };
    Some(unified(path, &on_disk, &after))
}

/// `before` against `after`, coloured, at most [`MAX_LINES`] lines.
fn unified(path: &str, before: &str, after: &str) -> String {
    let diff = similar::TextDiff::from_lines(before, after);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    let lines: Vec<&str> = text.lines().collect();
    let mut shown: Vec<String> = (lines.iter().take(MAX_LINES))
        .map(|line| colour(line))
        .collect();
    if lines.len() > MAX_LINES {
        let more = lines.len() - MAX_LINES;
        shown.push(paint(QUIET, &format!("… {more} more lines")));
    }
    if lines.is_empty() {
        shown.push(paint(QUIET, &format!("(no change to {path})")));
    }
    shown.join("\n")
}

fn colour(line: &str) -> String {
    let style = match line.as_bytes().first() {
        Some(b'+') if !line.starts_with("+++") => AnsiColor::Green.on_default(),
        Some(b'-') if !line.starts_with("---") => FAIL,
        Some(b'@') => TOOL,
        _ => return format!("    {line}"),
    };
    format!("    {}", paint(style, line))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_edit_shows_the_lines_it_replaces() {
        let dir = tempfile_dir();
        std::fs::write(dir.join("a.txt"), "one\ntwo\nthree\n").unwrap();
        let input = json!({"path": "a.txt", "old_string": "two", "new_string": "2"});
        let shown =
            anstream::adapter::strip_str(&of("edit", &input, Some(&dir)).unwrap()).to_string();
        assert!(shown.contains("-two") && shown.contains("+2"), "{shown}");
        assert!(shown.contains("a/a.txt"), "{shown}");
    }

    #[test]
    fn a_new_file_is_all_added_and_other_tools_have_no_diff() {
        let input = json!({"path": "new.txt", "content": "hello\n"});
        let shown = of("write", &input, None).unwrap();
        assert!(anstream::adapter::strip_str(&shown)
            .to_string()
            .contains("+hello"));
        assert!(of("bash", &json!({"command": "ls"}), None).is_none());
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("ryvos-diff-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
