//! Workspace snapshots: the files of a workspace at every run's start and every turn's end,
//! kept by content in `$RYVOS_HOME/snapshots`, so that `rewind` and `fork` bring the files back
//! with the conversation — whatever changed them, the file tools or any command, since a
//! snapshot reads the workspace itself.
//!
//! Each workspace has one [`tracker::Tracker`], which hears changes from the kernel and stores
//! each snapshot as the changes since an earlier one ([`chain`]). The newest snapshot of
//! each workspace is named in `snapshots/heads`, so a process that starts later reads again
//! only the files whose metadata changed.

mod chain;
mod manifest;
mod objects;
mod restore;
mod tracker;
mod tree;
mod watcher;

#[cfg(test)]
mod tests;

pub use restore::Restored;
use tree::Tree;

use crate::config::RewindConfig;
use objects::Objects;
use ryvos_protocol::records::WorkspaceMark;
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tracker::Tracker;
use tree::{Excludes, Reader};

/// The snapshots of every workspace this process runs in.
#[derive(Clone)]
pub struct Snapshots(Arc<Inner>);

struct Inner {
    enabled: bool,
    objects: Objects,
    heads: PathBuf,
    excludes: Excludes,
    max_file_bytes: u64,
    trackers: Mutex<HashMap<PathBuf, Arc<Mutex<Tracker>>>>,
}

impl Snapshots {
    /// The snapshots kept in `home`, as `[rewind]` says; a bad exclude glob is named.
    pub fn new(home: &Path, config: &RewindConfig) -> Result<Self, String> {
        let dir = home.join("snapshots");
        Ok(Self(Arc::new(Inner {
            enabled: config.enabled,
            objects: Objects::new(dir.join("objects")),
            heads: dir.join("heads"),
            excludes: Excludes::new(&config.exclude)?,
            max_file_bytes: config.max_file_mb.saturating_mul(1 << 20),
            trackers: Mutex::default(),
        })))
    }

    /// Whether turns take snapshots (`[rewind] enabled`).
    pub fn enabled(&self) -> bool {
        self.0.enabled
    }

    fn reader<'a>(&'a self, root: &'a Path) -> Reader<'a> {
        Reader {
            root,
            objects: &self.0.objects,
            excludes: &self.0.excludes,
            max_file_bytes: self.0.max_file_bytes,
        }
    }

    fn head_file(&self, workspace: &Path) -> PathBuf {
        let key = Objects::id_of(workspace.as_os_str().as_encoded_bytes());
        self.0.heads.join(key)
    }

    fn tracker(&self, workspace: &Path) -> Arc<Mutex<Tracker>> {
        let mut trackers = self.0.trackers.lock().unwrap_or_else(|p| p.into_inner());
        let tracker = trackers.entry(workspace.to_path_buf()).or_insert_with(|| {
            let head = std::fs::read_to_string(self.head_file(workspace)).ok();
            let head = head.map(|h| h.trim().to_owned());
            Arc::new(Mutex::new(Tracker::new(
                workspace.to_path_buf(),
                &self.0.objects,
                head,
            )))
        });
        tracker.clone()
    }

    /// A snapshot of `workspace` as it is now (this blocks: call it off the async threads).
    /// One that fails says why in its `unkept`.
    pub fn take(&self, workspace: &Path) -> WorkspaceMark {
        if let Some(why) = not_a_project(workspace) {
            return WorkspaceMark {
                workspace: workspace.display().to_string(),
                snapshot: None,
                unkept: Some(why),
            };
        }
        let tracker = self.tracker(workspace);
        let mut tracker = tracker.lock().unwrap_or_else(|p| p.into_inner());
        let mark = |snapshot, unkept| WorkspaceMark {
            workspace: workspace.display().to_string(),
            snapshot,
            unkept,
        };
        match self.snapshot_of(&mut tracker) {
            Ok(taken) => mark(Some(taken.id), taken.unkept),
            Err(e) => {
                tracing::warn!("no snapshot of {}: {e}", workspace.display());
                mark(None, Some(format!("the snapshot failed: {e}")))
            }
        }
    }

    fn snapshot_of(&self, tracker: &mut Tracker) -> io::Result<tracker::Taken> {
        let root = tracker.root().to_path_buf();
        let taken = tracker.snapshot(&self.reader(&root))?;
        // A turn that changed nothing has the head already named.
        if tracker.saved_head.as_deref() == Some(taken.id.as_str()) {
            return Ok(taken);
        }
        let head = self.head_file(&root);
        objects::private_dir(&self.0.heads)?;
        let mut temp = tempfile::Builder::new()
            .prefix(".new-")
            .tempfile_in(&self.0.heads)?;
        std::io::Write::write_all(&mut temp, taken.id.as_bytes())?;
        temp.persist(&head).map_err(|e| e.error)?;
        tracker.saved_head = Some(taken.id.clone());
        Ok(taken)
    }

    /// [`Self::take`] on a blocking thread.
    pub async fn take_async(&self, workspace: PathBuf) -> WorkspaceMark {
        let snapshots = self.clone();
        let fallback = workspace.display().to_string();
        tokio::task::spawn_blocking(move || snapshots.take(&workspace))
            .await
            .unwrap_or_else(|e| WorkspaceMark {
                workspace: fallback,
                snapshot: None,
                unkept: Some(format!("the snapshot failed: {e}")),
            })
    }

    /// Keeps `text` (a summary) among the objects; its id.
    pub fn put_text(&self, text: &str) -> io::Result<String> {
        self.0.objects.put(text.as_bytes())
    }

    /// The text kept as `id`.
    pub fn text(&self, id: &str) -> io::Result<String> {
        let bytes = self.0.objects.read(id)?;
        String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// The tree of snapshot `id`.
    fn tree(&self, id: &str) -> io::Result<Tree> {
        manifest::tree_at(&self.0.objects, id)
    }

    /// Why `mark`'s files cannot be brought back, if they cannot: not taken, not whole, or
    /// an object it needs (for a file that differs from the workspace's last snapshot) is
    /// missing or damaged. Checked before anything changes. Blocks.
    pub fn refusal(&self, mark: &WorkspaceMark) -> Option<String> {
        let to = match self.mark_tree(mark) {
            Ok(tree) => tree,
            Err(why) => return Some(why),
        };
        let tracker = self.tracker(Path::new(&mark.workspace));
        let tracker = tracker.lock().unwrap_or_else(|p| p.into_inner());
        restore::check(&to, tracker.tree(), &self.0.objects).err()
    }

    fn mark_tree(&self, mark: &WorkspaceMark) -> Result<Tree, String> {
        if let Some(why) = &mark.unkept {
            return Err(why.clone());
        }
        let id = (mark.snapshot.as_deref()).ok_or("no snapshot was taken at that point")?;
        self.tree(id).map_err(|e| e.to_string())
    }

    /// Brings `mark`'s workspace back to its files then, after a snapshot of it as it is now
    /// (returned: what undoing this restores). Blocks.
    pub fn restore(&self, mark: &WorkspaceMark) -> Result<(WorkspaceMark, Restored), String> {
        let to = self.mark_tree(mark)?;
        let workspace = PathBuf::from(&mark.workspace);
        if !workspace.is_dir() {
            std::fs::create_dir_all(&workspace)
                .map_err(|e| format!("cannot make the workspace {}: {e}", mark.workspace))?;
        }
        let tracker = self.tracker(&workspace);
        let mut tracker = tracker.lock().unwrap_or_else(|p| p.into_inner());
        let now = self
            .snapshot_of(&mut tracker)
            .map_err(|e| format!("the workspace as it is now could not be kept: {e}"))?;
        let before = WorkspaceMark {
            workspace: mark.workspace.clone(),
            snapshot: Some(now.id),
            unkept: now.unkept,
        };
        let from = tracker.tree().clone();
        restore::check(&to, &from, &self.0.objects)?;
        let restored = restore::restore(&workspace, &from, &to, &self.0.objects)
            .map_err(|e| format!("the files could not all be brought back: {e}"))?;
        Ok((before, restored))
    }

    /// Makes `into` (new, or empty) hold `mark`'s files. Blocks.
    pub fn copy_to(&self, mark: &WorkspaceMark, into: &Path) -> Result<Restored, String> {
        let to = self.mark_tree(mark)?;
        let empty = Tree::new();
        restore::check(&to, &empty, &self.0.objects)?;
        std::fs::create_dir_all(into)
            .map_err(|e| format!("cannot make {}: {e}", into.display()))?;
        restore::restore(into, &empty, &to, &self.0.objects)
            .map_err(|e| format!("the files could not all be copied: {e}"))
    }
}

/// Why `workspace` is not snapshotted, when it is the whole machine or a home directory (a
/// read-only run may work there): a snapshot is of a project.
fn not_a_project(workspace: &Path) -> Option<String> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let whole = workspace == Path::new("/") || home.as_deref() == Some(workspace);
    whole.then(|| {
        format!(
            "{} is not a project directory: no snapshot is taken of it",
            workspace.display()
        )
    })
}
