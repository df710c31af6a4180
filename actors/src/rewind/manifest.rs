//! A snapshot's manifest: the paths that changed since the snapshot it is stored against (its
//! parent, see [`super::chain`]), or, for a workspace's first, the whole tree.

use super::objects::Objects;
use super::tree::{Entry, Tree};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;

/// Each path that changed: what it is now, or `None` when it went.
pub(super) type Changes = BTreeMap<String, Option<Entry>>;

/// The longest chain a manifest can have: one per bit of its number, and the first.
const MAX_CHAIN: usize = 65;

/// One snapshot, as stored.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Manifest {
    /// The snapshot these changes apply to; `None` for a whole tree.
    pub(super) parent: Option<String>,
    /// Its number among its workspace's snapshots, from 0.
    pub(super) number: u64,
    /// When the tree was read (Unix nanoseconds): a file changed in the same clock tick may
    /// look unchanged by its metadata, so it is read again next time.
    pub(super) taken_ns: i128,
    pub(super) changes: Changes,
}

impl Manifest {
    /// Stores the manifest; its id.
    pub(super) fn save(&self, objects: &Objects) -> io::Result<String> {
        let bytes = serde_json::to_vec(self).map_err(io::Error::other)?;
        objects.put(&bytes)
    }

    /// The manifest `id`.
    pub(super) fn load(objects: &Objects, id: &str) -> io::Result<Self> {
        serde_json::from_slice(&objects.read(id)?).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("snapshot manifest {id} cannot be read: {e}"),
            )
        })
    }
}

/// Snapshot `id`'s chain, from the whole tree to it, each manifest with its id.
pub(super) fn chain_of(objects: &Objects, id: &str) -> io::Result<Vec<(String, Manifest)>> {
    let mut chain = vec![(id.to_owned(), Manifest::load(objects, id)?)];
    while let Some(parent) = chain.last().and_then(|(_, m)| m.parent.clone()) {
        if chain.len() >= MAX_CHAIN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("snapshot {id}'s chain of manifests does not end"),
            ));
        }
        let manifest = Manifest::load(objects, &parent)?;
        chain.push((parent, manifest));
    }
    chain.reverse();
    Ok(chain)
}

/// The tree at snapshot `id`.
pub(super) fn tree_at(objects: &Objects, id: &str) -> io::Result<Tree> {
    let mut tree = Tree::new();
    for (_, manifest) in chain_of(objects, id)? {
        apply(&mut tree, manifest.changes);
    }
    Ok(tree)
}

/// Applies `changes` to `tree`.
pub(super) fn apply(tree: &mut Tree, changes: Changes) {
    for (path, entry) in changes {
        match entry {
            Some(entry) => tree.insert(path, entry),
            None => tree.remove(&path),
        };
    }
}

/// What changed from `old` to `new`: every path added, changed (its metadata included) or
/// gone.
pub(super) fn changes(old: &Tree, new: &Tree) -> Changes {
    let mut changes = BTreeMap::new();
    for (path, entry) in new {
        if old.get(path) != Some(entry) {
            changes.insert(path.clone(), Some(entry.clone()));
        }
    }
    for path in old.keys() {
        if !new.contains_key(path) {
            changes.insert(path.clone(), None);
        }
    }
    changes
}
