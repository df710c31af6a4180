//! Where each snapshot's manifest is stored from: skip deltas, as Subversion stores its
//! revisions. Snapshot `n` of a workspace (numbered from 0, the whole tree) stores what changed
//! since snapshot `n` with its lowest set bit cleared, so the tree of any snapshot is its chain
//! of at most 64 manifests replayed, and a turn that changes a few files stores those few
//! entries times a logarithm of how many snapshots there are, never the whole tree again.

use super::manifest::{Changes, Manifest};
use super::objects::Objects;
use super::tree::Tree;
use std::io;

/// A workspace's chain of snapshots, as the next one extends it.
#[derive(Default)]
pub(super) struct Chain {
    /// The number the next snapshot takes.
    next: u64,
    /// The latest snapshot's manifest.
    head: Option<String>,
    /// For each level L, the latest snapshot whose number is a multiple of 2^L.
    bases: Vec<String>,
    /// For each level L, what changed since that snapshot.
    since: Vec<Changes>,
}

/// How many levels number `n`'s chain has.
fn levels(n: u64) -> usize {
    (u64::BITS - n.leading_zeros()) as usize + 1
}

impl Chain {
    /// The chain going on from snapshot `head`, with that snapshot's tree and when it was
    /// read, rebuilt from its manifests.
    pub(super) fn resume(objects: &Objects, head: &str) -> io::Result<(Self, Tree, i128)> {
        let chain = super::manifest::chain_of(objects, head)?;
        let last = chain.last().expect("a chain ends at its head");
        let (number, taken_ns) = (last.1.number, last.1.taken_ns);
        let mut tree = Tree::new();
        for (_, manifest) in &chain {
            super::manifest::apply(&mut tree, manifest.changes.clone());
        }
        let mut resumed = Chain {
            next: number + 1,
            head: Some(head.to_owned()),
            ..Chain::default()
        };
        for level in 0..levels(number) {
            let base = number & !((1u64 << level) - 1);
            let at = chain.iter().position(|(_, m)| m.number == base);
            let Some(at) = at else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("snapshot {head}'s chain lacks snapshot {base}"),
                ));
            };
            resumed.bases.push(chain[at].0.clone());
            let mut since = Changes::new();
            for (_, manifest) in &chain[at + 1..] {
                since.extend(manifest.changes.clone());
            }
            resumed.since.push(since);
        }
        Ok((resumed, tree, taken_ns))
    }

    /// Stores a snapshot whose tree is `tree`, `changes` since the last one, read at
    /// `taken_ns`; its manifest. Nothing changed: the last one is it.
    pub(super) fn record(
        &mut self,
        changes: Changes,
        tree: &Tree,
        taken_ns: i128,
        objects: &Objects,
    ) -> io::Result<String> {
        if let (Some(head), true) = (&self.head, changes.is_empty()) {
            return Ok(head.clone());
        }
        let number = self.next;
        let (parent, stored) = match number {
            0 => (
                None,
                tree.iter()
                    .map(|(p, e)| (p.clone(), Some(e.clone())))
                    .collect(),
            ),
            n => {
                while self.since.len() < levels(n) + 1 {
                    let top = self.since.last().cloned().unwrap_or_default();
                    let base = self.bases.last().cloned().unwrap_or_default();
                    self.since.push(top);
                    self.bases.push(base);
                }
                for since in &mut self.since {
                    since.extend(changes.iter().map(|(p, e)| (p.clone(), e.clone())));
                }
                let level = n.trailing_zeros() as usize + 1;
                (Some(self.bases[level].clone()), self.since[level].clone())
            }
        };
        let id = Manifest {
            parent,
            number,
            taken_ns,
            changes: stored,
        }
        .save(objects)?;
        // The levels `number` is a multiple of start again from it.
        let upto = match number {
            0 => levels(0) + 1,
            n => (n.trailing_zeros() as usize + 1).min(self.since.len()),
        };
        self.bases.resize(self.bases.len().max(upto), String::new());
        self.since
            .resize(self.since.len().max(upto), Changes::new());
        for level in 0..upto {
            self.bases[level] = id.clone();
            self.since[level].clear();
        }
        self.next = number + 1;
        self.head = Some(id.clone());
        Ok(id)
    }
}
