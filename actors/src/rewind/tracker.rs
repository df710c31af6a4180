//! One workspace's snapshots: its tree as last taken, kept current by the kernel's change
//! events, so a turn's snapshot reads only what the turn changed.

use super::chain::Chain;
use super::manifest::{self, Changes};
use super::objects::Objects;
use super::tree::{self, Kind, Read1, Reader, Tree};
use super::watcher::{Heard, Watcher};
use std::io;
use std::path::{Path, PathBuf};

/// A file changed this close (in ns) before its reading may have changed again in the same
/// clock tick unseen: it is read again.
const RACY_NS: i128 = 50_000_000;

/// A workspace's snapshots.
pub(super) struct Tracker {
    root: PathBuf,
    tree: Tree,
    /// The snapshots taken, as the next one extends them.
    chain: Chain,
    /// When the tree was last read whole or in part.
    taken_ns: i128,
    /// `None` until the tree is first read, and where the kernel cannot watch it (then each
    /// snapshot reads the tree whole, reusing what did not change).
    watcher: Option<Watcher>,
    /// Watching is out of reach (the watch limit), so it is not tried again.
    unwatchable: bool,
    /// The tree must be read whole at the next snapshot.
    rescan: bool,
    /// Why no snapshot of this workspace is taken, once found (too many paths): it is not
    /// read again every turn.
    refused: Option<String>,
    /// The snapshot `snapshots/heads` names for this workspace, as this process wrote it.
    pub(super) saved_head: Option<String>,
}

/// A snapshot taken.
pub(super) struct Taken {
    /// Its manifest.
    pub(super) id: String,
    /// Why the files cannot be brought back to it, if they cannot.
    pub(super) unkept: Option<String>,
}

fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

impl Tracker {
    /// The snapshots of the workspace at `root`, going on from the snapshot `head` (whose
    /// tree spares reading again what did not change since).
    pub(super) fn new(root: PathBuf, objects: &Objects, head: Option<String>) -> Self {
        let resumed = head.and_then(|id| {
            Chain::resume(objects, &id)
                .inspect_err(|e| {
                    tracing::warn!("snapshots of {} start afresh: {e}", root.display())
                })
                .ok()
        });
        let (chain, tree, taken_ns) = resumed.unwrap_or_default();
        Self {
            root,
            tree,
            chain,
            taken_ns,
            watcher: None,
            unwatchable: false,
            rescan: true,
            refused: None,
            saved_head: None,
        }
    }

    /// The workspace's directory.
    pub(super) fn root(&self) -> &Path {
        &self.root
    }

    /// The tree as the last snapshot took it.
    pub(super) fn tree(&self) -> &Tree {
        &self.tree
    }

    /// Takes a snapshot of the workspace as it is now. One that fails leaves the tree as it
    /// was, and the next reads it whole: no change is lost with it.
    pub(super) fn snapshot(&mut self, reader: &Reader) -> io::Result<Taken> {
        if let Some(why) = &self.refused {
            return Err(io::Error::other(why.clone()));
        }
        let started = now_ns();
        let mut before = Changes::new();
        let recorded = self.take(reader, started, &mut before);
        let id = match recorded {
            Ok(id) => id,
            Err(e) => {
                manifest::apply(&mut self.tree, before);
                self.rescan = true;
                if tree::too_many_paths(&e) {
                    self.refused = Some(e.to_string());
                    self.watcher = None;
                }
                return Err(e);
            }
        };
        self.taken_ns = started;
        Ok(Taken {
            id,
            unkept: tree::unkept(&self.tree),
        })
    }

    /// Reads what changed and stores it; `before` keeps what the tree held of every path it
    /// changed, to undo a failure.
    fn take(&mut self, reader: &Reader, started: i128, before: &mut Changes) -> io::Result<String> {
        let heard = match self.watcher.as_mut() {
            Some(watcher) if !self.rescan => Some(watcher.heard()?),
            _ => None,
        };
        let (changes, whole) = match heard {
            Some(heard) if !heard.rescan => (self.apply(reader, heard, before)?, None),
            _ => {
                let (changes, tree) = self.read_whole(reader)?;
                (changes, Some(tree))
            }
        };
        let tree = whole.as_ref().unwrap_or(&self.tree);
        let id = self.chain.record(changes, tree, started, reader.objects)?;
        if let Some(tree) = whole {
            self.tree = tree;
        }
        Ok(id)
    }

    /// Reads the whole tree again, watching every directory afresh; what changed, and the
    /// tree.
    fn read_whole(&mut self, reader: &Reader) -> io::Result<(Changes, Tree)> {
        if !self.unwatchable && self.watcher.is_none() {
            self.watcher = Watcher::new()
                .inspect_err(|e| tracing::warn!("cannot watch {}: {e}", self.root.display()))
                .ok();
            self.unwatchable = self.watcher.is_none();
        }
        if let Some(watcher) = self.watcher.as_mut() {
            watcher.clear();
        }
        let mut tree = Tree::new();
        let mut failed = None;
        let watcher = &mut self.watcher;
        let racy = self.taken_ns - RACY_NS;
        reader.walk("", &self.tree, racy, &mut tree, &mut |rel, full| {
            if let Some(w) = watcher.as_mut() {
                if let Err(e) = w.watch(rel, full) {
                    failed = Some(e);
                }
            }
        })?;
        if let Some(e) = failed {
            tracing::warn!(
                "cannot watch every directory of {} ({e}; see fs.inotify.max_user_watches): \
                 each snapshot reads the whole tree",
                self.root.display()
            );
            self.watcher = None;
            self.unwatchable = true;
        }
        self.rescan = self.watcher.is_none();
        Ok((manifest::changes(&self.tree, &tree), tree))
    }

    /// Reads the paths the kernel named again; what changed. What the tree held of each path
    /// it changes is kept in `before`.
    fn apply(
        &mut self,
        reader: &Reader,
        heard: Heard,
        before: &mut Changes,
    ) -> io::Result<Changes> {
        let watcher = self.watcher.as_mut().expect("watching");
        let mut failed = None;
        for path in heard.paths {
            // Everything under a path that changed may change with it.
            let mut touched: Vec<String> = tree::under(&self.tree, &path).cloned().collect();
            touched.push(path.clone());
            for p in &touched {
                before
                    .entry(p.clone())
                    .or_insert_with(|| self.tree.get(p).cloned());
            }
            // A path the kernel named changed: its contents are read again.
            let read = match reader.read(&path, self.tree.get(&path), i128::MIN) {
                Ok(read) => read,
                Err(e) if tree::gone(&e) => Read1::Gone,
                Err(e) => return Err(e),
            };
            let was_dir = self.tree.get(&path).is_some_and(|e| e.kind == Kind::Dir);
            match read {
                Read1::Gone => {
                    for p in touched {
                        self.tree.remove(&p);
                    }
                }
                Read1::Found(entry) => {
                    let is_dir = entry.kind == Kind::Dir;
                    // A directory made here (perhaps where one was removed in the same turn,
                    // its watch gone with it) is watched and read whole.
                    let made = is_dir && (!was_dir || heard.made_dirs.contains(&path));
                    if !is_dir || made {
                        for p in touched.iter().filter(|p| **p != path) {
                            self.tree.remove(p);
                        }
                    }
                    self.tree.insert(path.clone(), entry);
                    if made {
                        let mut sub = Tree::new();
                        reader.walk(
                            &path,
                            &Tree::new(),
                            i128::MAX,
                            &mut sub,
                            &mut |rel, full| {
                                if let Err(e) = watcher.watch(rel, full) {
                                    failed = Some(e);
                                }
                            },
                        )?;
                        for (p, e) in sub {
                            before.entry(p.clone()).or_insert(None);
                            self.tree.insert(p, e);
                        }
                    }
                }
            }
        }
        if let Some(e) = failed {
            tracing::warn!(
                "cannot watch a new directory of {}: {e}",
                self.root.display()
            );
            self.rescan = true;
        }
        Ok(before
            .iter()
            .filter_map(|(path, old)| {
                let now = self.tree.get(path);
                (now != old.as_ref()).then(|| (path.clone(), now.cloned()))
            })
            .collect())
    }
}
