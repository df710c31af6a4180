//! The built-in tools: read, write, edit, bash, glob, grep.

mod bash;
mod edit;
mod glob;
mod grep;
mod read;
mod write;

pub use bash::Bash;
pub use edit::Edit;
pub use glob::Glob;
pub use grep::Grep;
pub use read::Read;
pub use write::Write;

use super::{Tool, ToolContext, ToolError};
use crate::sandbox::FileRules;
use crate::workspace::{Access, Workspace};
use std::path::Path;
use std::sync::Arc;

/// Every built-in tool.
pub fn all() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(Read),
        Arc::new(Write),
        Arc::new(Edit),
        Arc::new(Bash),
        Arc::new(Glob),
        Arc::new(Grep),
    ]
}

/// The string argument `key` (present: the schema was checked).
fn str_arg<'a>(input: &'a serde_json::Value, key: &str) -> &'a str {
    input.get(key).and_then(|v| v.as_str()).unwrap_or_default()
}

/// The text of the file `input`'s `path` names, as it is now on disk; `None` when there is no
/// such file. For a reconcile: what a cut-off write or edit left.
async fn text_now(
    input: &serde_json::Value,
    ctx: &ToolContext,
) -> Result<Option<String>, ToolError> {
    let shown = str_arg(input, "path").to_owned();
    let path = ctx.workspace.resolve(&shown)?;
    if !path.exists() {
        return Ok(None);
    }
    let (workspace, rules) = (ctx.workspace.clone(), ctx.sandbox.file_rules());
    blocking(move || read_checked(&workspace, &rules, &path, &shown).map(Some)).await
}

/// The text of `path`, opened as [`open_checked`] opens it to be read.
fn read_checked(
    workspace: &Workspace,
    rules: &FileRules,
    path: &Path,
    shown: &str,
) -> Result<String, ToolError> {
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut open_checked(workspace, rules, path, Access::Read, shown)?,
        &mut text,
    )
    .map_err(|e| ToolError::Execution(format!("cannot read '{shown}': {e}")))?;
    Ok(text)
}

/// What a cut-off write or edit is found to have done: `said`, when the text of the file
/// `input` names now passes `done`; `None` otherwise (or when there is no such file).
async fn found_done(
    input: &serde_json::Value,
    ctx: &ToolContext,
    done: impl FnOnce(&str) -> bool,
    said: impl FnOnce() -> String,
) -> Result<Option<String>, ToolError> {
    let now = text_now(input, ctx).await?;
    Ok(now.is_some_and(|now| done(&now)).then(said))
}

/// Runs blocking file work off the async workers.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ToolError::Execution(format!("the tool's worker failed: {e}")))?
}

/// Opens `path` (resolved) for `access` beneath the workspace, and checks the place it really
/// is against the sandbox's rules: a symlink swapped in by a concurrent command may lead to a
/// covered secret or to git's hooks inside the workspace. A file opened to be written is
/// truncated only once it has passed. `shown` is the path as the model gave it.
fn open_checked(
    workspace: &Workspace,
    rules: &FileRules,
    path: &Path,
    access: Access,
    shown: &str,
) -> Result<std::fs::File, ToolError> {
    let verb = match access {
        Access::Read => "read",
        Access::Write => "write",
    };
    let opened = workspace
        .open(path, access)
        .map_err(|e| ToolError::Execution(format!("cannot {verb} '{shown}': {e}")))?;
    let refused = match access {
        Access::Read => rules.refuses_read(&opened.real),
        Access::Write => rules.refuses_write(&opened.real),
    };
    if let Some(why) = refused {
        // What this open made there goes again: nothing is left in a protected place.
        if opened.created {
            if let Err(e) = std::fs::remove_file(&opened.real) {
                tracing::warn!("removing {}: {e}", opened.real.display());
            }
        }
        return Err(ToolError::Denied(why));
    }
    let file = opened.file;
    if access == Access::Write {
        file.set_len(0)
            .map_err(|e| ToolError::Execution(format!("cannot write '{shown}': {e}")))?;
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SandboxConfig;
    use crate::sandbox::{Sandbox, Site};

    #[test]
    fn a_link_inside_the_workspace_to_a_protected_place_is_refused_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        let ws = Workspace::new(&root).unwrap();
        let home = tempfile::tempdir().unwrap();
        let sandbox = Sandbox::new(&SandboxConfig::default(), Site::home(home.path())).unwrap();
        let rules = sandbox.for_run(&ws).file_rules();
        // Checked as a plain file, then swapped for a link to git's config.
        std::fs::write(root.join("notes.txt"), "notes").unwrap();
        let resolved = ws.resolve("notes.txt").unwrap();
        assert!(rules.refuses_write(&resolved).is_none());
        std::fs::remove_file(root.join("notes.txt")).unwrap();
        std::os::unix::fs::symlink(".git/config", root.join("notes.txt")).unwrap();
        let opened = open_checked(&ws, &rules, &resolved, Access::Write, "notes.txt");
        assert!(matches!(opened, Err(ToolError::Denied(_))), "{opened:?}");
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            "[core]\n",
            "not truncated"
        );
        // A directory swapped for a link to the hooks: nothing is made there.
        std::fs::create_dir(root.join("docs")).unwrap();
        let resolved = ws.resolve("docs/post-checkout").unwrap();
        std::fs::remove_dir(root.join("docs")).unwrap();
        std::os::unix::fs::symlink(".git/hooks", root.join("docs")).unwrap();
        assert!(open_checked(&ws, &rules, &resolved, Access::Write, "docs/post-checkout").is_err());
        assert!(!root.join(".git/hooks/post-checkout").exists());
    }
}
