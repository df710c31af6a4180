//! Bringing a workspace's files to a snapshot's tree: what differs is removed, written or
//! given its mode, and nothing else is touched. Everything it needs is checked before the
//! first change, so a restore that cannot be done whole is not begun.
//!
//! Every path is reached beneath the workspace's directory (cap-std: `openat2`'s
//! `RESOLVE_BENEATH` where the kernel has it), so a symlink a command left where a directory
//! was cannot lead a write, a removal or a mode out of the workspace.

use super::objects::Objects;
use super::tree::{Entry, Kind, Tree};
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt, Permissions};
use std::collections::BTreeSet;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a restore changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Paths written or made (files, symlinks, directories) or given their mode.
    pub written: usize,
    /// Paths removed.
    pub removed: usize,
}

/// Why `to` cannot be restored over `from` (only the objects of files that differ are read).
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
    let dir = Dir::open_ambient_dir(root, cap_std::ambient_authority())?;
    let mut done = Restored::default();
    let loosened = loosen(&dir, from, to)?;
    remove_what_goes(&dir, from, to, &mut done)?;
    // Parents before what they hold; directories stay writable until the end.
    for (path, entry) in to {
        let now = from.get(path).filter(|now| same_kind(entry, now));
        if now.is_some_and(|now| now.same_as(entry)) {
            continue;
        }
        let written = match (&entry.kind, now) {
            (Kind::Dir, None) => make_dir(&dir, path),
            (Kind::Dir, Some(_)) => continue,
            (Kind::File { .. }, Some(now)) if now.kind == entry.kind => {
                set_mode(&dir, path, entry.mode)
            }
            (Kind::File { id, .. }, _) => write_file(&dir, path, &objects.read(id)?, entry.mode),
            (Kind::Symlink { to }, _) => {
                let temp = temp_name(path);
                (dir.symlink_contents(to, &temp)).and_then(|()| dir.rename(&temp, &dir, path))
            }
            (Kind::Unkept { why }, _) => Err(io::Error::other(why.clone())),
        };
        written.map_err(|e| with_path(e, path))?;
        done.written += 1;
    }
    // Directories' modes last, the deepest first: a read-only one was filled first.
    for (path, entry) in to.iter().rev().filter(|(_, e)| e.kind == Kind::Dir) {
        let same = from.get(path).is_some_and(|now| now.same_as(entry));
        if !same || loosened.contains(path) {
            set_mode(&dir, path, entry.mode).map_err(|e| with_path(e, path))?;
        }
    }
    Ok(done)
}

/// Makes writable the directories the restore removes from or writes into that are not
/// (a read-only cache a tool made); those it loosened, whose modes are set again at the end.
fn loosen(dir: &Dir, from: &Tree, to: &Tree) -> io::Result<BTreeSet<String>> {
    let changed = from
        .iter()
        .filter(|(p, e)| !to.get(*p).is_some_and(|t| t.same_as(e)))
        .map(|(p, _)| p)
        .chain(
            to.iter()
                .filter(|(p, e)| !from.get(*p).is_some_and(|f| f.same_as(e)))
                .map(|(p, _)| p),
        );
    let parents: BTreeSet<&str> = changed
        .filter_map(|p| p.rsplit_once('/').map(|(parent, _)| parent))
        .collect();
    let mut loosened = BTreeSet::new();
    for parent in parents {
        let Some(entry) = from.get(parent).filter(|e| e.kind == Kind::Dir) else {
            continue;
        };
        if entry.mode & 0o200 == 0 {
            set_mode(dir, parent, entry.mode | 0o700).map_err(|e| with_path(e, parent))?;
            loosened.insert(parent.to_owned());
        }
    }
    Ok(loosened)
}

/// Removes what is not in `to`, or is there as another kind: the deepest first. A directory
/// that still holds what snapshots leave out (`[rewind] exclude`) is kept, with it.
fn remove_what_goes(dir: &Dir, from: &Tree, to: &Tree, done: &mut Restored) -> io::Result<()> {
    for (path, now) in from.iter().rev() {
        if to.get(path).is_some_and(|e| same_kind(e, now)) {
            continue;
        }
        let removed = match now.kind {
            Kind::Dir => dir.remove_dir(path),
            _ => dir.remove_file(path),
        };
        match removed {
            Ok(()) => done.removed += 1,
            Err(e) if super::tree::gone(&e) => {}
            Err(e) if now.kind == Kind::Dir && e.kind() == io::ErrorKind::DirectoryNotEmpty => {}
            Err(e) => return Err(with_path(e, path)),
        }
    }
    Ok(())
}

fn same_kind(a: &Entry, b: &Entry) -> bool {
    std::mem::discriminant(&a.kind) == std::mem::discriminant(&b.kind)
}

fn set_mode(dir: &Dir, path: &str, mode: u32) -> io::Result<()> {
    let mode = std::fs::Permissions::from_mode(mode);
    dir.set_permissions(path, Permissions::from_std(mode))
}

/// Makes the directory `path`; one already there (kept for what it holds) will do, but
/// nothing else in its place.
fn make_dir(dir: &Dir, path: &str) -> io::Result<()> {
    match dir.create_dir(path) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            match dir.symlink_metadata(path)?.is_dir() {
                true => Ok(()),
                false => Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "something other than a directory is there",
                )),
            }
        }
        made => made,
    }
}

/// Writes `bytes` as the file `path` with `mode`: whole, to a new file renamed over it.
fn write_file(dir: &Dir, path: &str, bytes: &[u8], mode: u32) -> io::Result<()> {
    let temp = temp_name(path);
    let mut options = OpenOptions::new();
    options.write(true).create_new(true).mode(mode & 0o7777);
    let mut file = dir.open_with(&temp, &options)?;
    file.write_all(bytes)?;
    // The creation mode passes through the umask: set it as recorded.
    file.set_permissions(Permissions::from_std(std::fs::Permissions::from_mode(mode)))?;
    drop(file);
    dir.rename(&temp, dir, path)
}

/// A new name in `path`'s directory, short whatever the name's length, for a file or a
/// symlink renamed over `path` once whole.
fn temp_name(path: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = format!(".ryvos-rewind-{}-{n}", std::process::id());
    match path.rsplit_once('/') {
        Some((parent, _)) => format!("{parent}/{name}"),
        None => name,
    }
}

fn with_path(e: io::Error, path: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{path}: {e}"))
}
