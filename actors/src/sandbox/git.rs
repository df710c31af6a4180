//! Where git keeps code it runs later, outside any sandbox: hooks (`.git/hooks`, or the
//! directory `core.hooksPath` names) and the config (`core.fsmonitor`, aliases, filters,
//! `core.sshCommand`). In a git workspace these stay read-only for the model's commands and are
//! refused by the file tools; objects, refs and the index stay writable, so `git add` and `git
//! commit` work.

use std::path::{Path, PathBuf};

/// The repository around a workspace, as the sandbox protects it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct GitGuard {
    /// The git directory itself: pinned in place (a mount point cannot be renamed or removed),
    /// so a copy with writable hooks cannot take its place.
    pub git_dir: Option<PathBuf>,
    /// What stays read-only inside it: the hooks directories and the config.
    pub read_only: Vec<PathBuf>,
}

impl GitGuard {
    /// The guard of the repository holding `workspace`, if there is one. A missing hooks
    /// directory is made (empty, as `git init` makes it) so that it can be held read-only
    /// rather than created by a command.
    pub(crate) fn around(workspace: &Path) -> Self {
        let Some((git_dir, dot_git_file)) = find_git_dir(workspace) else {
            return Self::default();
        };
        // A worktree's config and hooks are those of the repository it belongs to.
        let common = std::fs::read_to_string(git_dir.join("commondir"))
            .ok()
            .map(|c| git_dir.join(c.trim()));
        let mut read_only: Vec<PathBuf> = dot_git_file.into_iter().collect();
        for dir in std::iter::once(&git_dir).chain(common.as_ref()) {
            read_only.push(dir.join("config"));
            read_only.push(made(dir.join("hooks")));
            // Submodules keep their own config and hooks under modules/.
            for module in modules(dir) {
                read_only.push(module.join("config"));
                read_only.push(made(module.join("hooks")));
            }
        }
        // Relative hook paths are taken from the top of the working tree.
        let top = match git_dir.file_name() {
            Some(name) if name == ".git" => git_dir.parent().unwrap_or(workspace),
            _ => workspace,
        };
        if let Some(named) = hooks_path(&git_dir, top) {
            read_only.push(made(named));
        }
        let read_only = read_only
            .into_iter()
            .filter_map(|p| p.canonicalize().ok())
            .collect();
        Self {
            git_dir: git_dir.canonicalize().ok(),
            read_only,
        }
    }

    /// Whether `path` (resolved) is one the model may not write.
    pub(crate) fn protects(&self, path: &Path) -> bool {
        self.read_only.iter().any(|p| path.starts_with(p))
    }
}

/// The git directory of the repository holding `dir`: a `.git` directory, or the one a `.git`
/// file points to (a worktree or submodule), in `dir` or above it; and that `.git` file, which
/// must not be pointed elsewhere.
fn find_git_dir(dir: &Path) -> Option<(PathBuf, Option<PathBuf>)> {
    for candidate in dir.ancestors() {
        let dot_git = candidate.join(".git");
        if dot_git.is_dir() {
            return Some((dot_git, None));
        }
        if dot_git.is_file() {
            let text = std::fs::read_to_string(&dot_git).ok()?;
            let target = text.trim().strip_prefix("gitdir:")?.trim();
            return Some((candidate.join(target), Some(dot_git)));
        }
    }
    None
}

/// `dir`, made (empty, as `git init` makes a hooks directory) if it does not exist yet, so that
/// it can be held read-only rather than created by a command.
fn made(dir: PathBuf) -> PathBuf {
    if !dir.exists() {
        if let Err(e) = std::fs::create_dir_all(&dir) {
            tracing::warn!("cannot make {} to hold it read-only: {e}", dir.display());
        }
    }
    dir
}

/// The git directories of the submodules under `git_dir/modules`, nested ones included.
fn modules(git_dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![git_dir.join("modules")];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten().filter(|e| e.path().is_dir()) {
            let path = entry.path();
            if path.join("HEAD").is_file() {
                pending.push(path.join("modules"));
                found.push(path);
            } else {
                // A submodule at a nested path (modules/lib/a) is a directory of directories.
                pending.push(path);
            }
        }
    }
    found
}

/// The hooks directory `core.hooksPath` names in the repository's config, if any (relative
/// paths are taken from `top`, the working tree's top).
fn hooks_path(git_dir: &Path, top: &Path) -> Option<PathBuf> {
    let config = std::fs::read_to_string(git_dir.join("config")).ok()?;
    let mut in_core = false;
    for line in config.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_core = line.to_lowercase().starts_with("[core");
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if in_core && key.trim().eq_ignore_ascii_case("hookspath") {
            let value = value.trim().trim_matches('"');
            let path = match value.strip_prefix("~/") {
                Some(rest) => PathBuf::from(std::env::var_os("HOME")?).join(rest),
                None => top.join(value),
            };
            return Some(path);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_config_and_a_named_hooks_path_are_protected() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(ws.join("tools/hooks")).unwrap();
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(
            ws.join(".git/config"),
            "[core]\n\tbare = false\n\thooksPath = tools/hooks\n",
        )
        .unwrap();
        std::fs::create_dir_all(ws.join(".git/modules/lib/a")).unwrap();
        std::fs::write(ws.join(".git/modules/lib/a/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(ws.join(".git/modules/lib/a/config"), "").unwrap();
        // From a subdirectory of the repository too.
        let guard = GitGuard::around(&ws.join("sub"));
        assert_eq!(guard.git_dir, Some(ws.join(".git")));
        assert!(ws.join(".git/hooks").is_dir(), "made to be held");
        assert!(guard.protects(&ws.join(".git/hooks/pre-commit")));
        assert!(guard.protects(&ws.join(".git/config")));
        assert!(guard.protects(&ws.join("tools/hooks/post-checkout")));
        assert!(guard.protects(&ws.join(".git/modules/lib/a/hooks/pre-commit")));
        assert!(guard.protects(&ws.join(".git/modules/lib/a/config")));
        assert!(!guard.protects(&ws.join(".git/modules/lib/a/objects/ab")));
        assert!(!guard.protects(&ws.join(".git/objects/ab")));
        assert!(!guard.protects(&ws.join(".git/index")));
    }

    #[test]
    fn a_directory_outside_any_repository_has_nothing_to_protect() {
        let dir = tempfile::tempdir().unwrap();
        let guard = GitGuard::around(dir.path());
        // The temporary directory is not inside a repository on any sane machine.
        if guard.git_dir.is_none() {
            assert!(guard.read_only.is_empty());
        }
    }
}
