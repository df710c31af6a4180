//! What a `write` or `edit` waiting for approval would change, as a unified diff of the file
//! as it is on disk against the file as the call would leave it: the person asked sees the
//! change, not only its arguments.

use crate::style::{paint, FAIL, QUIET, TOOL};
use anstyle::AnsiColor;
use serde_json::Value;
use std::path::Path;

/// The most lines of a diff shown; the rest are counted.
const MAX_LINES: usize = 40;
/// The largest file read for a diff: a larger one is not shown.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// The diff of what `tool` called with `input` would change in `workspace`; `None` for any
/// other tool, arguments that name no file, or a file that is not a regular one in the
/// workspace of at most [`MAX_FILE_BYTES`] (the path is the model's: a pipe or a device is
/// never opened).
pub fn of(tool: &str, input: &Value, workspace: Option<&Path>) -> Option<String> {
    let path = input["path"].as_str()?;
    let on_disk = match workspace {
        Some(workspace) => read_in(workspace, path)?,
        None => String::new(),
    };
    let after = match tool {
        "write" => input["content"].as_str()?.to_owned(),
        // The edit replaces its one occurrence (it refuses none, or many).
        "edit" => {
            let (old, new) = (input["old_string"].as_str()?, input["new_string"].as_str()?);
            on_disk.replacen(old, new, 1)
        }
        _ => return None,
    };
    Some(unified(path, &on_disk, &after))
}

/// The text of `path` in `workspace`: empty when there is no such file (a new one); `None`
/// when the path leads out of the workspace (as the tools resolve it), or to what is not a
/// regular file, too large, or not text.
fn read_in(workspace: &Path, path: &str) -> Option<String> {
    let file = ryvos::Workspace::new(workspace).ok()?.resolve(path).ok()?;
    let meta = match std::fs::symlink_metadata(&file) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(String::new()),
        Err(_) => return None,
    };
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
        return None;
    }
    std::fs::read_to_string(file).ok()
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
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        std::fs::write(dir.join("a.txt"), "one\ntwo\nthree\n").unwrap();
        let input = json!({"path": "a.txt", "old_string": "two", "new_string": "2"});
        let shown =
            anstream::adapter::strip_str(&of("edit", &input, Some(dir)).unwrap()).to_string();
        assert!(shown.contains("-two") && shown.contains("+2"), "{shown}");
        assert!(shown.contains("a/a.txt"), "{shown}");
    }

    #[test]
    fn what_is_not_a_regular_file_in_the_workspace_has_no_diff() {
        let dir = tempfile::tempdir().unwrap();
        let input = json!({"path": "/dev/zero", "content": "x"});
        assert!(of("write", &input, Some(dir.path())).is_none());
        let input = json!({"path": "../../../../etc/hostname", "content": "x"});
        assert!(of("write", &input, Some(dir.path())).is_none());
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
}
