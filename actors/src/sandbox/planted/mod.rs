//! git code a command planted for later, disabled once the command ends.
//!
//! The repository around the workspace has its hooks and config held read-only while a command
//! runs (see [`super::git`]). A repository the command makes (`git init x`), or one inside the
//! workspace that the guard does not hold (a nested clone), is writable: a hook written there,
//! or a config naming a program (`core.fsmonitor`, `core.hooksPath`, a `!` alias), would run
//! at the user's next git command there, outside any sandbox. So after every command the
//! workspace is searched for git directories (`node_modules` passed over), and what the command wrote in them that
//! runs a program is disabled before anything else can run it: hooks are moved aside into
//! `hooks.disabled-by-ryvos/`, config lines are commented out. What the command did not touch
//! (its ctime, which no command can set back, is older than the command) is left alone; a
//! hooks directory the command touched is taken as planted whole (old files moved in).
//!
//! The daemon may be root: everything is done through a handle on the workspace (cap-std,
//! `openat2` beneath it), so a link a command planted never leads a move or a write out of
//! it, and only regular files are read, at most 1 MiB. What cannot be checked whole (a
//! workspace past 200,000 entries, a `.git` file pointing out of it) is said, not passed.

mod config;

use cap_std::fs::{Dir, Metadata, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Where moved hooks go, beside `hooks/`.
const DISABLED_HOOKS: &str = "hooks.disabled-by-ryvos";

/// The most directory entries looked at after one command: a bound on the search's cost.
const MAX_ENTRIES: usize = 200_000;

/// The largest config read; a larger one is moved aside whole.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The search after one command: the workspace, the repository already guarded (read-only
/// while the command ran), and when the command started.
#[derive(Debug)]
pub(super) struct PlantedGit {
    workspace: PathBuf,
    guarded: Option<PathBuf>,
    since: SystemTime,
}

/// What one search found to say.
#[derive(Default)]
struct Findings {
    disabled: Vec<String>,
    failed: Vec<String>,
}

impl PlantedGit {
    /// A search of `workspace` after a command starting now; `guarded` is skipped.
    pub(super) fn starting_now(workspace: PathBuf, guarded: Option<PathBuf>) -> Self {
        // A file's ctime is taken from a coarse clock that may lag this one by a tick.
        let since = SystemTime::now() - Duration::from_secs(1);
        Self {
            workspace,
            guarded,
            since,
        }
    }

    /// Disables what the command planted, and says what for the model; empty when nothing.
    pub(super) fn disable(&self) -> Vec<String> {
        let mut found = Findings::default();
        match Dir::open_ambient_dir(&self.workspace, cap_std::ambient_authority()) {
            Ok(root) => self.disable_in(&root, &mut found),
            Err(e) => found
                .failed
                .push(format!("{}: {e}", self.workspace.display())),
        }
        let mut notes = Vec::new();
        if !found.disabled.is_empty() {
            notes.push(format!(
                "[sandbox] This command set up git code that would run later, outside any \
                 sandbox: {}. It was disabled (hooks moved into {DISABLED_HOOKS}/, config \
                 lines commented out). Configure git with -c or environment variables instead.",
                found.disabled.join(", ")
            ));
        }
        if !found.failed.is_empty() {
            tracing::error!(
                "planted git code could not be disabled: {}",
                found.failed.join("; ")
            );
            notes.push(format!(
                "[sandbox] This command may have set up git code that would run later, and it \
                 could not be checked or disabled: {}. Do not run git there before looking.",
                found.failed.join("; ")
            ));
        }
        notes
    }

    fn disable_in(&self, root: &Dir, found: &mut Findings) {
        let (git_dirs, pointers) = self.git_dirs(root, found);
        for git_dir in git_dirs {
            let Ok(git) = root.open_dir(&git_dir) else {
                continue;
            };
            let shown = self.workspace.join(&git_dir);
            self.disable_hooks(&git, &shown, found);
            for config in ["config", "config.worktree"] {
                self.disable_config(&git, config, &shown, found);
            }
            // A `commondir` sends git to another directory's config and hooks.
            if self.touched(git.symlink_metadata("commondir").ok()) {
                move_aside(&git, "commondir", &git, &shown, found);
            }
        }
        // A `.git` file the command made that points out of the workspace: its target cannot
        // be checked, so the pointer goes.
        for pointer in pointers {
            let parent = pointer.parent().unwrap_or(Path::new(""));
            let Ok(dir) = root.open_dir(if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            }) else {
                continue;
            };
            if self.touched(dir.symlink_metadata(".git").ok()) {
                let shown = self.workspace.join(parent);
                move_aside(&dir, ".git", &dir, &shown, found);
            }
        }
    }

    /// Whether the command changed the file `meta` describes (its ctime is not older than the
    /// command).
    fn touched(&self, meta: Option<Metadata>) -> bool {
        let ctime = meta.and_then(|m| {
            use cap_std::fs::MetadataExt;
            let secs = u64::try_from(m.ctime()).ok()?;
            Some(SystemTime::UNIX_EPOCH + Duration::new(secs, m.ctime_nsec() as u32))
        });
        ctime.is_some_and(|c| c >= self.since)
    }

    /// Every git directory of the workspace (relative to it): `.git` directories and links,
    /// the targets of `.git` files inside it, and bare repositories; not the guarded one. And
    /// the `.git` files that point out of it.
    fn git_dirs(&self, root: &Dir, found: &mut Findings) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let mut git_dirs = Vec::new();
        let mut pointers = Vec::new();
        let mut pending = vec![PathBuf::new()];
        let mut budget = MAX_ENTRIES;
        'walk: while let Some(dir) = pending.pop() {
            let listed = match dir.as_os_str().is_empty() {
                true => root.entries(),
                false => root.read_dir(&dir),
            };
            let Ok(entries) = listed else {
                continue;
            };
            let mut names = Vec::new();
            for entry in entries.flatten() {
                if budget == 0 {
                    found.failed.push(format!(
                        "the workspace has more than {MAX_ENTRIES} entries; those past them were \
                         not searched for planted git code"
                    ));
                    break 'walk;
                }
                budget -= 1;
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let name = entry.file_name();
                let path = dir.join(&name);
                if name == ".git" {
                    if kind.is_file() {
                        match self.pointed(root, &path) {
                            Some(target) => git_dirs.push(target),
                            None => pointers.push(path),
                        }
                    } else {
                        git_dirs.push(path);
                    }
                } else if kind.is_dir() && name != "node_modules" {
                    // Packages' own trees are large, and nobody runs git in them.
                    pending.push(path);
                }
                names.push((name, kind.is_dir()));
            }
            // A bare repository: HEAD, objects/ and refs/ side by side (searched inside too).
            let has = |wanted: &str, dir: bool| names.iter().any(|(n, d)| n == wanted && *d == dir);
            if has("HEAD", false) && has("objects", true) && has("refs", true) {
                git_dirs.push(dir);
            }
        }
        let guarded = self
            .guarded
            .as_ref()
            .and_then(|g| g.strip_prefix(&self.workspace).ok());
        git_dirs.retain(|dir| Some(dir.as_path()) != guarded);
        git_dirs.sort();
        git_dirs.dedup();
        (git_dirs, pointers)
    }

    /// The git directory the `.git` file at `dot_git` points to, relative to the workspace,
    /// when it is inside it; `None` when it points out of it (or cannot be read).
    fn pointed(&self, root: &Dir, dot_git: &Path) -> Option<PathBuf> {
        let text = read_small(root, dot_git)?;
        let target = text.trim().strip_prefix("gitdir:")?.trim();
        let target = match Path::new(target).is_absolute() {
            true => Path::new(target)
                .strip_prefix(&self.workspace)
                .ok()?
                .to_path_buf(),
            false => dot_git.parent()?.join(target),
        };
        // Beneath the workspace, links and `..` resolved as cap-std resolves them.
        root.open_dir(&target).ok()?;
        Some(target)
    }

    /// Moves aside the hooks the command wrote; all of them when it touched the hooks
    /// directory itself (files moved in keep their age); `hooks` as a whole when it is a link.
    fn disable_hooks(&self, git: &Dir, shown: &Path, found: &mut Findings) {
        let Ok(meta) = git.symlink_metadata("hooks") else {
            return;
        };
        if meta.file_type().is_symlink() {
            if self.touched(Some(meta)) {
                move_aside(git, "hooks", git, shown, found);
            }
            return;
        }
        let whole = self.touched(Some(meta));
        let Ok(hooks) = git.open_dir("hooks") else {
            return;
        };
        let Ok(entries) = hooks.entries() else {
            return;
        };
        let planted: Vec<_> = entries
            .flatten()
            .map(|e| e.file_name())
            .filter(|name| !name.to_string_lossy().ends_with(".sample"))
            .filter(|name| whole || self.touched(hooks.symlink_metadata(name).ok()))
            .collect();
        if planted.is_empty() {
            return;
        }
        let aside = match aside_dir(git) {
            Ok(aside) => aside,
            Err(e) => {
                return found
                    .failed
                    .push(format!("{}: {e}", shown.join(DISABLED_HOOKS).display()))
            }
        };
        let hooks_shown = shown.join("hooks");
        for name in planted {
            move_aside(&hooks, &name, &aside, &hooks_shown, found);
        }
    }

    /// Comments out the lines that run a program, in a config (`name`) the command wrote; a
    /// config that is not a small regular file goes aside whole.
    fn disable_config(&self, git: &Dir, name: &str, shown: &Path, found: &mut Findings) {
        let meta = git.symlink_metadata(name).ok();
        let regular = meta
            .as_ref()
            .is_some_and(|m| m.is_file() && m.len() <= MAX_CONFIG_BYTES);
        if !self.touched(meta) {
            return;
        }
        let text = match regular.then(|| read_small(git, Path::new(name))).flatten() {
            Some(text) => text,
            None => return move_aside(git, name, git, shown, found),
        };
        let (rewritten, keys) = config::comment_out_programs(&text);
        if keys.is_empty() {
            return;
        }
        let temporary = format!("{name}.ryvos-tmp");
        let written = replace(git, name, &temporary, rewritten.as_bytes());
        let shown = shown.join(name);
        match written {
            Ok(()) => {
                (found.disabled).extend(keys.iter().map(|k| format!("{k} in {}", shown.display())))
            }
            Err(e) => found.failed.push(format!("{}: {e}", shown.display())),
        }
    }
}

/// The directory hooks are moved into, made if need be; refused unless it is a directory of
/// its own (a link the command planted would lead the move elsewhere).
fn aside_dir(git: &Dir) -> std::io::Result<Dir> {
    match git.create_dir(DISABLED_HOOKS) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = git.symlink_metadata(DISABLED_HOOKS)?;
    if !meta.is_dir() {
        return Err(std::io::Error::other("it is not a directory of its own"));
    }
    git.open_dir(DISABLED_HOOKS)
}

/// Moves `name` out of `from` into `to` under a name not taken there (`name.disabled-by-ryvos`
/// when both are one directory), noting it (`shown`: where `from` is, for the model).
fn move_aside(from: &Dir, name: impl AsRef<Path>, to: &Dir, shown: &Path, found: &mut Findings) {
    let name = name.as_ref();
    let same = std::ptr::eq(from, to);
    let base = match same {
        true => format!("{}.disabled-by-ryvos", name.display()),
        false => name.display().to_string(),
    };
    let mut target = base.clone();
    let mut n = 1;
    while to.symlink_metadata(&target).is_ok() {
        target = format!("{base}.{n}");
        n += 1;
    }
    let what = shown.join(name);
    match from.rename(name, to, &target) {
        Ok(()) => found.disabled.push(what.display().to_string()),
        Err(e) => found.failed.push(format!("{}: {e}", what.display())),
    }
}

/// Replaces `name` in `dir` with `bytes`, through a new file (`temporary`, made afresh: a
/// link the command left under that name is not followed).
fn replace(dir: &Dir, name: &str, temporary: &str, bytes: &[u8]) -> std::io::Result<()> {
    match dir.remove_file(temporary) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut file = dir.open_with(temporary, OpenOptions::new().write(true).create_new(true))?;
    file.write_all(bytes)?;
    dir.rename(temporary, dir, name)
}

/// A regular file of at most [`MAX_CONFIG_BYTES`] beneath `root`, as text.
fn read_small(root: &Dir, path: &Path) -> Option<String> {
    let file = root.open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(MAX_CONFIG_BYTES).read_to_string(&mut text).ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repository_made_now_loses_its_hooks_and_programs_and_an_old_one_keeps_them() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let old = root.join("old/.git");
        std::fs::create_dir_all(old.join("hooks")).unwrap();
        std::fs::write(old.join("hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::write(old.join("config"), "[core]\n\tfsmonitor = mine\n").unwrap();
        // Older than any command: set its times back (ctime cannot be, so the search starts
        // later instead).
        std::thread::sleep(Duration::from_millis(1100));
        let check = PlantedGit::starting_now(root.clone(), None);
        let new = root.join("x/.git");
        std::fs::create_dir_all(new.join("hooks")).unwrap();
        std::fs::write(new.join("hooks/pre-commit"), "#!/bin/sh\ntouch /tmp/x\n").unwrap();
        std::fs::write(new.join("hooks/pre-push.sample"), "").unwrap();
        std::fs::write(new.join("config"), "[core]\n\thooksPath = elsewhere\n").unwrap();
        let notes = check.disable();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("pre-commit") && notes[0].contains("core.hookspath"));
        assert!(!new.join("hooks/pre-commit").exists());
        assert!(new.join(DISABLED_HOOKS).join("pre-commit").exists());
        assert!(new.join("hooks/pre-push.sample").exists());
        assert!(old.join("hooks/pre-commit").exists());
        assert!(std::fs::read_to_string(old.join("config"))
            .unwrap()
            .contains("\tfsmonitor"));
        // Done once: a second look finds nothing more to do.
        assert!(check.disable().is_empty());
    }
}
