//! Where a simple command writes, beyond its redirections: the operands of programs that
//! change files (`touch`, `mkdir`, `sed -i`, `truncate`, `cp`, `rsync`, …), `dd of=`,
//! `git -C DIR`, and inline programs of interpreters (`python3 -c`, `perl -e`, `node -e`)
//! that name a path outside the workspace and look like they write. The sandbox is the
//! guarantee; this decides what to *ask* about, so where it cannot tell, it says "outside".

use super::{is_harmless_sink, is_inside, operands, program};
use crate::security::shell::SimpleCommand;
use std::path::Path;

/// Programs whose every operand is a file they may create, change or remove.
const OPERAND_WRITERS: &[&str] = &[
    "touch", "mkdir", "rmdir", "truncate", "shred", "chmod", "chown", "chgrp", "unlink", "mkfifo",
];
/// Programs whose last operand is where they write.
const DESTINATION_WRITERS: &[&str] = &["cp", "mv", "install", "ln", "rsync", "scp"];
/// Interpreters whose `-c`/`-e` argument is a program we cannot read.
const INLINE_INTERPRETERS: &[(&str, &str)] = &[
    ("python", "-c"),
    ("python3", "-c"),
    ("perl", "-e"),
    ("ruby", "-e"),
    ("node", "-e"),
    ("php", "-r"),
    ("lua", "-e"),
];
/// Words in inline code that suggest it writes or runs something.
const CODE_WRITES: &[&str] = &[
    "open(", "open ", "write", "unlink", "remove", "rmtree", "rename", "mkdir", "system", "exec",
    "spawn", "symlink", "truncate", "'w'", "\"w\"", "'a'", "\"a\"", ">",
];

/// What `cmd` (run from `workspace`) writes outside the workspace, each as a reason.
pub(super) fn outside(cmd: &SimpleCommand, workspace: &Path) -> Vec<String> {
    let name = program(cmd);
    let operands = operands(cmd);
    let mut reasons = Vec::new();
    let out = |target: &str| !is_inside(target, workspace) && !is_harmless_sink(target);
    if OPERAND_WRITERS.contains(&name) {
        for target in operands.iter().filter(|t| out(t)) {
            reasons.push(format!("{name} of a path outside the workspace ({target})"));
        }
    }
    if name == "sed"
        && cmd
            .words
            .iter()
            .any(|w| w.starts_with("-i") || w.starts_with("--in-place"))
    {
        for target in operands.iter().skip(1).filter(|t| out(t)) {
            reasons.push(format!("sed -i of a file outside the workspace ({target})"));
        }
    }
    if DESTINATION_WRITERS.contains(&name) {
        if let Some(dest) = destinations(cmd, &operands).find(|d| out(d)) {
            reasons.push(format!(
                "{name} into a place outside the workspace ({dest})"
            ));
        }
    }
    if name == "dd" {
        for target in cmd.words.iter().filter_map(|w| w.strip_prefix("of=")) {
            if out(target) {
                reasons.push(format!("dd writing outside the workspace ({target})"));
            }
        }
    }
    if name == "git" {
        for dir in repositories(cmd).filter(|d| out(d)) {
            reasons.push(format!(
                "git working on a repository outside the workspace ({dir})"
            ));
        }
    }
    if let Some((flag, code)) = inline_code(cmd, name) {
        if inline_code_writes_outside(code, workspace) {
            let short: String = code.chars().take(60).collect();
            reasons.push(format!(
                "{name} {flag} code that may write outside the workspace ({short})"
            ));
        }
    }
    reasons
}

/// Where `cp`, `mv` and their kind may put things: the directory `-t DIR` /
/// `--target-directory=DIR` names, then the last operand.
fn destinations<'a>(
    cmd: &'a SimpleCommand,
    operands: &[&'a String],
) -> impl Iterator<Item = &'a str> {
    let flagged = cmd
        .words
        .iter()
        .enumerate()
        .find_map(|(i, w)| match w.as_str() {
            "-t" => cmd.words.get(i + 1).map(String::as_str),
            _ => None,
        })
        .or_else(|| {
            cmd.words
                .iter()
                .find_map(|w| w.strip_prefix("--target-directory="))
        });
    flagged
        .into_iter()
        .chain(operands.last().map(|o| o.as_str()))
}

/// The repositories and work trees a `git` command names (`-C`, `--git-dir`, `--work-tree`).
fn repositories(cmd: &SimpleCommand) -> impl Iterator<Item = &str> {
    let words = &cmd.words;
    words
        .iter()
        .enumerate()
        .filter_map(|(i, w)| match w.as_str() {
            "-C" | "--git-dir" | "--work-tree" => words.get(i + 1).map(String::as_str),
            _ => w
                .strip_prefix("--git-dir=")
                .or_else(|| w.strip_prefix("--work-tree=")),
        })
}

/// The code an interpreter is given inline (`python3 -c CODE`, `node -e CODE`), with its flag.
/// `python3.12` is python; `-Ic` ends with the flag that takes the code; `--eval` too.
fn inline_code<'a>(cmd: &'a SimpleCommand, name: &str) -> Option<(&'static str, &'a str)> {
    let (_, flag) = INLINE_INTERPRETERS
        .iter()
        .find(|(p, _)| name == *p || name.strip_prefix(p).is_some_and(is_version))?;
    let letter = &flag[1..];
    let takes_code = |w: &String| {
        w == flag
            || w == "--eval"
            || (w.starts_with('-') && !w.starts_with("--") && w.ends_with(letter))
    };
    let at = cmd.words.iter().position(takes_code)?;
    Some((flag, cmd.words.get(at + 1)?.as_str()))
}

/// `3`, `3.12`, `5.36`: a version suffix of an interpreter's name.
fn is_version(suffix: &str) -> bool {
    !suffix.is_empty() && suffix.chars().all(|c| c.is_ascii_digit() || c == '.')
}

/// Whether inline code names a path outside the workspace (`..`, `~`, an absolute path not
/// under it) and looks like it writes or runs something.
fn inline_code_writes_outside(code: &str, workspace: &Path) -> bool {
    let writes = CODE_WRITES.iter().any(|w| code.contains(w));
    let names_outside = code.contains("..")
        || code.contains('~')
        || code
            .split(|c: char| c == '\'' || c == '"' || c.is_whitespace() || c == '(' || c == ',')
            .filter(|token| token.starts_with('/'))
            .any(|path| !is_inside(path, workspace) && !is_harmless_sink(path));
    writes && names_outside
}
