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
//! (its ctime, which no command can set back, is older than the command) is left alone.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where moved hooks go, beside `hooks/`.
const DISABLED_HOOKS: &str = "hooks.disabled-by-ryvos";

/// The most directory entries looked at after one command: a bound on the search's cost.
const MAX_ENTRIES: usize = 200_000;

/// Config keys (section, key; `*` for any subsection) whose value git runs as a program, or
/// that bring in config from elsewhere.
const RUNS_A_PROGRAM: &[(&str, &str)] = &[
    ("core", "hookspath"),
    ("core", "fsmonitor"),
    ("core", "sshcommand"),
    ("core", "pager"),
    ("core", "editor"),
    ("core", "askpass"),
    ("sequence", "editor"),
    ("diff", "external"),
    ("diff.*", "textconv"),
    ("diff.*", "command"),
    ("merge.*", "driver"),
    ("filter.*", "clean"),
    ("filter.*", "smudge"),
    ("filter.*", "process"),
    ("credential", "helper"),
    ("gpg", "program"),
    ("include", "path"),
    ("includeif.*", "path"),
    ("uploadpack", "packobjectshook"),
];

/// The search after one command: the places it could write, the repository already guarded
/// (read-only while it ran), and when it started.
#[derive(Debug)]
pub(super) struct PlantedGit {
    roots: Vec<PathBuf>,
    guarded: Option<PathBuf>,
    since: SystemTime,
}

impl PlantedGit {
    /// A search of `roots` after a command starting now; `guarded` is skipped.
    pub(super) fn starting_now(roots: Vec<PathBuf>, guarded: Option<PathBuf>) -> Self {
        // A file's ctime is taken from a coarse clock that may lag this one by a tick.
        let since = SystemTime::now() - Duration::from_secs(1);
        Self {
            roots,
            guarded,
            since,
        }
    }

    /// Disables what the command planted, and says what for the model; empty when nothing.
    pub(super) fn disable(&self) -> Vec<String> {
        let mut disabled = Vec::new();
        let mut failed = Vec::new();
        let mut budget = MAX_ENTRIES;
        for git_dir in self.git_dirs(&mut budget) {
            self.disable_hooks(&git_dir, &mut disabled, &mut failed);
            self.disable_config(&git_dir, &mut disabled, &mut failed);
        }
        let mut notes = Vec::new();
        if !disabled.is_empty() {
            notes.push(format!(
                "[sandbox] This command set up git code that would run later, outside any \
                 sandbox: {}. It was disabled (hooks moved into {DISABLED_HOOKS}/, config \
                 lines commented out). Configure git with -c or environment variables instead.",
                disabled.join(", ")
            ));
        }
        if !failed.is_empty() {
            tracing::error!(
                "planted git code could not be disabled: {}",
                failed.join("; ")
            );
            notes.push(format!(
                "[sandbox] This command set up git code that would run later, and it could not \
                 be disabled: {}. Do not run git there before removing it.",
                failed.join("; ")
            ));
        }
        if budget == 0 {
            tracing::warn!(
                "the search for planted git code stopped after {MAX_ENTRIES} entries of {:?}",
                self.roots
            );
        }
        notes
    }

    /// Whether the command changed `meta`'s file (its ctime is not older than the command).
    fn touched(&self, meta: &std::fs::Metadata) -> bool {
        let ctime =
            UNIX_EPOCH + Duration::new(meta.ctime().max(0) as u64, meta.ctime_nsec() as u32);
        ctime >= self.since
    }

    /// Every git directory under the roots: `.git` directories, those `.git` files point to
    /// inside the roots, and bare repositories; not the guarded one.
    fn git_dirs(&self, budget: &mut usize) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut pending: Vec<PathBuf> = self.roots.clone();
        while let Some(dir) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut subdirs = Vec::new();
            let mut names = Vec::new();
            for entry in entries.flatten() {
                if *budget == 0 {
                    return found;
                }
                *budget -= 1;
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                let name = entry.file_name();
                if name == ".git" {
                    if kind.is_dir() {
                        found.push(path);
                    } else if kind.is_file() {
                        found.extend(pointed_git_dir(&path).filter(|d| self.inside(d)));
                    }
                } else if kind.is_dir() && name != "node_modules" {
                    // Packages' own trees are large, and nobody runs git in them.
                    subdirs.push(path);
                }
                names.push((name, kind.is_dir()));
            }
            // A bare repository: HEAD, objects/ and refs/ side by side; not searched further.
            let has = |wanted: &str, dir: bool| names.iter().any(|(n, d)| n == wanted && *d == dir);
            if has("HEAD", false) && has("objects", true) && has("refs", true) {
                found.push(dir);
                continue;
            }
            pending.extend(subdirs);
        }
        found.retain(|dir| {
            let real = dir.canonicalize().unwrap_or_else(|_| dir.clone());
            self.guarded.as_ref() != Some(&real)
        });
        found.sort();
        found.dedup();
        found
    }

    fn inside(&self, path: &Path) -> bool {
        self.roots.iter().any(|root| path.starts_with(root))
    }

    /// Moves aside the hooks the command wrote (a `hooks` the command replaced by a link
    /// goes aside whole).
    fn disable_hooks(&self, git_dir: &Path, disabled: &mut Vec<String>, failed: &mut Vec<String>) {
        let hooks = git_dir.join("hooks");
        let Ok(meta) = std::fs::symlink_metadata(&hooks) else {
            return;
        };
        let aside = git_dir.join(DISABLED_HOOKS);
        let mut move_aside = |from: &Path, name: &std::ffi::OsStr| {
            let to = aside.join(name);
            let moved =
                std::fs::create_dir_all(&aside).and_then(|()| std::fs::rename(from, unused(&to)));
            match moved {
                Ok(()) => disabled.push(format!("the hook {}", from.display())),
                Err(e) => failed.push(format!("{}: {e}", from.display())),
            }
        };
        if meta.file_type().is_symlink() {
            if self.touched(&meta) {
                move_aside(&hooks, "hooks".as_ref());
            }
            return;
        }
        let Ok(entries) = std::fs::read_dir(&hooks) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name.to_string_lossy().ends_with(".sample") {
                continue;
            }
            let touched = std::fs::symlink_metadata(entry.path()).is_ok_and(|m| self.touched(&m));
            if touched {
                move_aside(&entry.path(), &name);
            }
        }
    }

    /// Comments out the config lines that run a program, in a config the command wrote.
    fn disable_config(&self, git_dir: &Path, disabled: &mut Vec<String>, failed: &mut Vec<String>) {
        let config = git_dir.join("config");
        let touched = std::fs::symlink_metadata(&config).is_ok_and(|m| self.touched(&m));
        if !touched {
            return;
        }
        let Ok(text) = std::fs::read_to_string(&config) else {
            return;
        };
        let (rewritten, keys) = comment_out_programs(&text);
        if keys.is_empty() {
            return;
        }
        let written = std::fs::write(config.with_extension("ryvos-tmp"), rewritten)
            .and_then(|()| std::fs::rename(config.with_extension("ryvos-tmp"), &config));
        match written {
            Ok(()) => disabled.extend(
                keys.iter()
                    .map(|key| format!("{key} in {}", config.display())),
            ),
            Err(e) => failed.push(format!("{}: {e}", config.display())),
        }
    }
}

/// `path`, or `path.N` for the first N that is free.
fn unused(path: &Path) -> PathBuf {
    let mut candidate = path.to_path_buf();
    let mut n = 1;
    while candidate.exists() {
        candidate = PathBuf::from(format!("{}.{n}", path.display()));
        n += 1;
    }
    candidate
}

/// The git directory a `.git` file points to (`gitdir: PATH`, relative to its directory).
fn pointed_git_dir(dot_git: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(dot_git).ok()?;
    let target = text.trim().strip_prefix("gitdir:")?.trim();
    Some(dot_git.parent()?.join(target))
}

/// `text` (a git config) with every line that sets a key of [`RUNS_A_PROGRAM`], or an alias
/// that runs a shell command (`!…`), commented out; and those keys, as `section.key`.
fn comment_out_programs(text: &str) -> (String, Vec<String>) {
    let mut section = String::new();
    let mut keys = Vec::new();
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            section = section_name(trimmed);
        } else if let Some(key) = key_of(trimmed) {
            let value = trimmed.split_once('=').map(|(_, v)| v.trim()).unwrap_or("");
            let runs = (section == "alias" && value.trim_matches('"').starts_with('!'))
                || RUNS_A_PROGRAM
                    .iter()
                    .any(|(s, k)| *k == key && (*s == section || matches_subsection(s, &section)));
            if runs {
                keys.push(format!("{section}.{key}"));
                out.push_str("# disabled by ryvos: a command the model ran set this: ");
                out.push_str(trimmed);
                out.push('\n');
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    (out, keys)
}

/// `[filter "lfs"]` → `filter.lfs`; `[core]` → `core` (lowercased but for the subsection).
fn section_name(header: &str) -> String {
    let inner = header
        .trim_start_matches('[')
        .split(']')
        .next()
        .unwrap_or("");
    match inner.split_once(char::is_whitespace) {
        Some((name, sub)) => format!("{}.{}", name.to_lowercase(), sub.trim().trim_matches('"')),
        None => inner.to_lowercase(),
    }
}

/// The key a config line sets, lowercased (`key = value`, or a bare `key` meaning true).
fn key_of(line: &str) -> Option<String> {
    if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
        return None;
    }
    let key = line.split('=').next()?.trim();
    Some(key.to_lowercase()).filter(|k| k.chars().all(|c| c.is_alphanumeric() || c == '-'))
}

/// Whether `pattern` (`filter.*`) covers `section` (`filter.lfs`).
fn matches_subsection(pattern: &str, section: &str) -> bool {
    match pattern.strip_suffix(".*") {
        Some(name) => section
            .strip_prefix(name)
            .is_some_and(|rest| rest.starts_with('.')),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_that_run_programs_are_commented_out_and_nothing_else() {
        let config = "[core]\n\tbare = false\n\tfsmonitor = touch /tmp/x\n\
                      [alias]\n\tst = status\n\tevil = !touch /tmp/x\n\
                      [filter \"lfs\"]\n\tsmudge = sh -c x\n[user]\n\tname = M\n";
        let (out, keys) = comment_out_programs(config);
        assert_eq!(keys, ["core.fsmonitor", "alias.evil", "filter.lfs.smudge"]);
        assert!(out.contains("bare = false") && out.contains("st = status"));
        assert!(out.contains("# disabled by ryvos: a command the model ran set this: fsmonitor"));
        assert!(!out.lines().any(|l| l.trim_start().starts_with("evil")));
        assert!(out.contains("name = M"));
    }

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
        let check = PlantedGit::starting_now(vec![root.clone()], None);
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
