//! Bringing a workspace's files to a snapshot's tree: what differs is removed, written or
//! given its mode, and nothing else is touched. Everything it needs is checked before the
//! first change, so a restore that cannot be done whole is not begun.

use super::objects::Objects;
use super::tree::{Entry, Kind, Tree};
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// What a restore changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Paths written or made (files, symlinks, directories) or given their mode.
    pub written: usize,
    /// Paths removed.
    pub removed: usize,
}

/// Why a tree cannot be restored.
pub(super) fn check(to: &Tree, from: &Tree, objects: &Objects) -> Result<(), String> {
    if let Some(why) = super::tree::unkept(to) {
        return Err(why);
    }
    for (path, entry) in to {
        let needed = !from.get(path).is_some_and(|now| now.kind == entry.kind);
        if let (true, Kind::File { id, .. }) = (needed, &entry.kind) {
            objects
                .read(id)
                .map_err(|e| format!("{path} cannot be brought back: {e}"))?;
        }
    }
    Ok(())
}

/// Brings the directory `root`, whose tree is `from`, to the tree `to`. Call [`check`] first.
pub(super) fn restore(
    root: &Path,
    from: &Tree,
    to: &Tree,
    objects: &Objects,
) -> io::Result<Restored> {
    let mut done = Restored::default();
    let full = |rel: &str| root.join(rel);
    // What is not in `to`, or is there as another kind: the deepest first.
    for (path, now) in from.iter().rev() {
        let kept = to.get(path).is_some_and(|e| same_kind(e, now));
        if kept {
            continue;
        }
        let removed = match now.kind {
            Kind::Dir => fs::remove_dir_all(full(path)),
            _ => fs::remove_file(full(path)),
        };
        match removed {
            Ok(()) => done.removed += 1,
            Err(e) if super::tree::gone(&e) => {}
            Err(e) => return Err(with_path(e, path)),
        }
    }
    // Parents before what they hold; directories stay writable until the end.
    for (path, entry) in to {
        let now = from.get(path).filter(|now| same_kind(entry, now));
        if now.is_some_and(|now| now.same_as(entry)) {
            continue;
        }
        let target = full(path);
        match (&entry.kind, now) {
            (Kind::Dir, None) => {
                fs::create_dir(&target)
                    .or_else(exists_ok)
                    .map_err(|e| with_path(e, path))?;
                done.written += 1;
            }
            (Kind::Dir, Some(_)) => {}
            (Kind::File { id, .. }, Some(now)) if now.kind == entry.kind => {
                set_mode(&target, entry.mode).map_err(|e| with_path(e, path))?;
                done.written += 1;
            }
            (Kind::File { id, .. }, _) => {
                let temp = beside(&target);
                objects
                    .write_to(id, &temp, entry.mode)
                    .and_then(|()| fs::rename(&temp, &target))
                    .map_err(|e| with_path(e, path))?;
                done.written += 1;
            }
            (Kind::Symlink { to }, _) => {
                let temp = beside(&target);
                std::os::unix::fs::symlink(to, &temp)
                    .and_then(|()| fs::rename(&temp, &target))
                    .map_err(|e| with_path(e, path))?;
                done.written += 1;
            }
            (Kind::Unkept { why }, _) => return Err(io::Error::other(why.clone())),
        }
    }
    // Directories' modes last, the deepest first: a read-only one was filled first.
    for (path, entry) in to.iter().rev().filter(|(_, e)| e.kind == Kind::Dir) {
        let same = from.get(path).is_some_and(|now| now.same_as(entry));
        if !same {
            set_mode(&full(path), entry.mode).map_err(|e| with_path(e, path))?;
        }
    }
    Ok(done)
}

fn same_kind(a: &Entry, b: &Entry) -> bool {
    std::mem::discriminant(&a.kind) == std::mem::discriminant(&b.kind)
}

fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

fn exists_ok(e: io::Error) -> io::Result<()> {
    match e.kind() {
        io::ErrorKind::AlreadyExists => Ok(()),
        _ => Err(e),
    }
}

/// A new name beside `path`, for a file renamed over it once whole.
fn beside(path: &Path) -> std::path::PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.ryvos-rewind-{}", std::process::id()))
}

fn with_path(e: io::Error, path: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{path}: {e}"))
}
