//! A workspace's tree as a snapshot keeps it: every path (relative, `/`-separated) with what it
//! is, its mode, and for a file the id of its contents. How a path is read into an entry, and
//! which paths are left out.

use super::objects::Objects;
use globset::{GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The most paths a snapshot reads: a workspace holding more is not a project directory (or
/// holds build output to exclude), and is not snapshotted.
pub(super) const MAX_PATHS: usize = 200_000;

/// A workspace over [`MAX_PATHS`].
#[derive(Debug, thiserror::Error)]
#[error(
    "the workspace holds over {MAX_PATHS} paths: add its large directories to [rewind] exclude"
)]
pub(super) struct TooManyPaths;

/// Whether `e` says the workspace is over [`MAX_PATHS`].
pub(super) fn too_many_paths(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<TooManyPaths>())
}

/// Every path of a workspace, in path order (a directory before what it holds).
pub(super) type Tree = BTreeMap<String, Entry>;

/// What one path is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Entry {
    #[serde(flatten)]
    pub(super) kind: Kind,
    /// The permission bits (`0o755`); 0 for a symlink.
    #[serde(rename = "m", default)]
    pub(super) mode: u32,
    /// What the file system said of it when it was read: unchanged, it need not be read again.
    #[serde(rename = "s", default)]
    pub(super) stat: Stat,
}

/// A path's kind, and what restoring it needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(super) enum Kind {
    File {
        id: String,
        size: u64,
    },
    Dir,
    Symlink {
        to: String,
    },
    /// A file whose contents are not kept, and why.
    Unkept {
        why: String,
    },
}

/// The parts of a path's metadata that change when it does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Stat {
    pub(super) size: u64,
    pub(super) mtime_ns: i128,
    pub(super) ctime_ns: i128,
    pub(super) ino: u64,
}

impl Stat {
    fn of(meta: &fs::Metadata) -> Self {
        Self {
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
            ino: meta.ino(),
        }
    }
}

impl Entry {
    /// Whether restoring `self` over `other` changes nothing (their metadata aside).
    pub(super) fn same_as(&self, other: &Entry) -> bool {
        self.kind == other.kind && self.mode == other.mode
    }
}

/// Which paths snapshots leave out: `[rewind] exclude`, and every repository's objects.
#[derive(Clone, Debug)]
pub(super) struct Excludes {
    names: GlobSet,
    paths: GlobSet,
}

impl Excludes {
    /// The excludes of `[rewind] exclude`; a bad glob is named.
    pub(super) fn new(globs: &[String]) -> Result<Self, String> {
        let mut names = GlobSetBuilder::new();
        let mut paths = GlobSetBuilder::new();
        for glob in globs {
            let pattern = glob.trim_end_matches('/');
            let parsed = globset::GlobBuilder::new(pattern.trim_start_matches('/'))
                .literal_separator(true)
                .build()
                .map_err(|e| format!("[rewind] exclude: '{glob}' is not a glob: {e}"))?;
            match pattern.contains('/') {
                true => paths.add(parsed),
                false => names.add(parsed),
            };
        }
        let built = |set: GlobSetBuilder| set.build().map_err(|e| e.to_string());
        Ok(Self {
            names: built(names)?,
            paths: built(paths)?,
        })
    }

    /// Whether `path` (relative) is left out, with all it holds.
    pub(super) fn excludes(&self, path: &str) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        let repository_objects = name == "objects" && path.ends_with(".git/objects");
        repository_objects || self.names.is_match(name) || self.paths.is_match(path)
    }
}

impl Default for Excludes {
    fn default() -> Self {
        Self::new(&[]).expect("no globs")
    }
}

/// How paths are read into entries.
pub(super) struct Reader<'a> {
    pub(super) root: &'a Path,
    pub(super) objects: &'a Objects,
    pub(super) excludes: &'a Excludes,
    /// Files larger than this are not kept.
    pub(super) max_file_bytes: u64,
}

/// What reading one path found.
pub(super) enum Read1 {
    /// Nothing is there (or it is left out).
    Gone,
    Found(Entry),
}

impl Reader<'_> {
    /// `rel`'s full path.
    pub(super) fn full(&self, rel: &str) -> PathBuf {
        match rel {
            "" => self.root.to_path_buf(),
            rel => self.root.join(rel),
        }
    }

    /// Reads the path `rel`; `known` is what was last read there, reused when its metadata
    /// did not change and it was read long enough after its last change (a change in the same
    /// clock tick would not show in the metadata).
    pub(super) fn read(
        &self,
        rel: &str,
        known: Option<&Entry>,
        racy_after_ns: i128,
    ) -> io::Result<Read1> {
        if !rel.is_empty() && self.excludes.excludes(rel) {
            return Ok(Read1::Gone);
        }
        let path = self.full(rel);
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if gone(&e) => return Ok(Read1::Gone),
            Err(e) => return Err(e),
        };
        let stat = Stat::of(&meta);
        let mode = meta.permissions().mode() & 0o7777;
        let kind = meta.file_type();
        if kind.is_dir() {
            if let Some(known) = known.filter(|k| k.kind == Kind::Dir && k.mode == mode) {
                return Ok(Read1::Found(known.clone()));
            }
        }
        if let Some(known) = known.filter(|k| k.stat == stat && k.mode == mode) {
            let settled = stat.mtime_ns.max(stat.ctime_ns) < racy_after_ns;
            if settled || kind.is_symlink() {
                return Ok(Read1::Found(known.clone()));
            }
        }
        let kind = if kind.is_dir() {
            Kind::Dir
        } else if kind.is_symlink() {
            let to = fs::read_link(&path)?;
            match to.to_str() {
                Some(to) => Kind::Symlink { to: to.to_owned() },
                None => Kind::Unkept {
                    why: format!("the symlink {rel} points at a name that is not UTF-8"),
                },
            }
        } else if kind.is_file() {
            self.file(rel, &path, &meta)?
        } else {
            // Sockets, pipes and devices hold no contents to keep: a rewind leaves them.
            return Ok(Read1::Gone);
        };
        let (mode, stat) = match kind {
            Kind::Symlink { .. } => (0, stat),
            // A directory's times change with what it holds, which is read path by path: its
            // own metadata is not kept, so a snapshot never differs by it alone.
            Kind::Dir => (mode, Stat::default()),
            _ => (mode, stat),
        };
        Ok(Read1::Found(Entry { kind, mode, stat }))
    }

    fn file(&self, rel: &str, path: &Path, meta: &fs::Metadata) -> io::Result<Kind> {
        if meta.len() > self.max_file_bytes {
            return Ok(Kind::Unkept {
                why: format!(
                    "{rel} is {} MiB, over [rewind] max_file_mb = {} (raise it, or add the \
                     path to [rewind] exclude)",
                    meta.len().div_ceil(1 << 20),
                    self.max_file_bytes >> 20
                ),
            });
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        let read = fs::File::open(path)
            .and_then(|f| f.take(self.max_file_bytes + 1).read_to_end(&mut bytes));
        match read {
            Ok(_) => {}
            Err(e) if gone(&e) => return Err(e),
            Err(e) => {
                return Ok(Kind::Unkept {
                    why: format!("{rel} could not be read: {e}"),
                })
            }
        }
        let id = self.objects.put(&bytes)?;
        Ok(Kind::File {
            id,
            size: bytes.len() as u64,
        })
    }

    /// Reads everything under the directory `rel` (not `rel` itself) into `tree`, reusing
    /// what `known` holds where nothing changed; calls `on_dir` with each directory found
    /// before reading what it holds (to watch it first, so nothing made meanwhile is missed).
    pub(super) fn walk(
        &self,
        rel: &str,
        known: &Tree,
        racy_after_ns: i128,
        tree: &mut Tree,
        on_dir: &mut dyn FnMut(&str, &Path),
    ) -> io::Result<()> {
        let dir = self.full(rel);
        on_dir(rel, &dir);
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if gone(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        for item in entries {
            let item = item?;
            let name = item.file_name();
            let name = name.to_string_lossy();
            let child = match rel {
                "" => name.into_owned(),
                rel => format!("{rel}/{name}"),
            };
            let read = match self.read(&child, known.get(&child), racy_after_ns) {
                Ok(read) => read,
                // Removed while the walk went by: it is not there.
                Err(e) if gone(&e) => Read1::Gone,
                Err(e) => return Err(e),
            };
            if let Read1::Found(entry) = read {
                let is_dir = entry.kind == Kind::Dir;
                tree.insert(child.clone(), entry);
                if tree.len() > MAX_PATHS {
                    return Err(io::Error::other(TooManyPaths));
                }
                if is_dir {
                    self.walk(&child, known, racy_after_ns, tree, on_dir)?;
                }
            }
        }
        Ok(())
    }
}

/// Whether `e` says the path is not there (any more).
pub(super) fn gone(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::NotFound) || e.raw_os_error() == Some(libc::ENOTDIR)
}

/// The paths under `rel` in `tree` (not `rel` itself).
pub(super) fn under<'t>(tree: &'t Tree, rel: &str) -> impl Iterator<Item = &'t String> {
    let prefix = format!("{rel}/");
    tree.range(prefix.clone()..)
        .take_while(move |(path, _)| path.starts_with(&prefix))
        .map(|(path, _)| path)
}

/// The first reason `tree` cannot be restored, and how many paths share the trouble.
pub(super) fn unkept(tree: &Tree) -> Option<String> {
    let mut whys = tree.values().filter_map(|e| match &e.kind {
        Kind::Unkept { why } => Some(why),
        _ => None,
    });
    let first = whys.next()?;
    Some(match whys.count() {
        0 => first.clone(),
        more => format!("{first}; and {more} more file(s) not kept"),
    })
}
