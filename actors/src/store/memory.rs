//! The memory tables: entries, their keyword index, and the collection's size.
//!
//! Written only inside the writer's transaction (with the rest of a group commit); read from
//! anywhere, like every table.

use super::tables::{MEMORIES, MEMORY_STATS, MEMORY_TERMS};
use super::{Context, MemoryEntry, Store, StoreError};
use crate::memory::bm25::Posting;
use crate::memory::terms::terms;
use redb::{ReadableDatabase, ReadableTable};
use std::collections::BTreeMap;

const TOTALS: &str = "totals";

/// The terms a memory is found by: its content's and its tags'.
fn indexed_terms(entry: &MemoryEntry) -> Vec<String> {
    let mut all = terms(&entry.content);
    for tag in &entry.tags {
        all.extend(terms(tag));
    }
    all
}

/// Stores `entries` and their postings, and updates the collection's size.
pub(super) fn index<'a>(
    txn: &redb::WriteTransaction,
    entries: impl Iterator<Item = &'a MemoryEntry>,
) -> Result<(), String> {
    let mut memories = txn.open_table(MEMORIES).map_err(|e| e.to_string())?;
    let mut postings = txn.open_table(MEMORY_TERMS).map_err(|e| e.to_string())?;
    let mut stats = txn.open_table(MEMORY_STATS).map_err(|e| e.to_string())?;
    let (mut count, mut total): (u64, u64) = match stats.get(TOTALS).map_err(|e| e.to_string())? {
        Some(v) => serde_json::from_slice(v.value()).map_err(|e| e.to_string())?,
        None => (0, 0),
    };
    for entry in entries {
        let row = serde_json::to_vec(entry).map_err(|e| e.to_string())?;
        memories
            .insert(entry.id.as_str(), row.as_slice())
            .map_err(|e| e.to_string())?;
        let words = indexed_terms(entry);
        let length = words.len() as u32;
        let mut tf: BTreeMap<String, u32> = BTreeMap::new();
        for w in words {
            *tf.entry(w).or_default() += 1;
        }
        for (term, n) in tf {
            let packed = (u64::from(n) << 32) | u64::from(length);
            postings
                .insert((term.as_str(), entry.id.as_str()), packed)
                .map_err(|e| e.to_string())?;
        }
        count += 1;
        total += u64::from(length);
    }
    let row = serde_json::to_vec(&(count, total)).map_err(|e| e.to_string())?;
    stats
        .insert(TOTALS, row.as_slice())
        .map_err(|e| e.to_string())?;
    Ok(())
}

impl Store {
    /// How many memories there are, and their total length in terms.
    pub fn memory_totals(&self) -> Result<(u64, u64), StoreError> {
        let doing = || "reading the size of the memory".to_string();
        let txn = self.db.begin_read().doing(doing)?;
        let stats = txn.open_table(MEMORY_STATS).doing(doing)?;
        match stats.get(TOTALS).doing(doing)? {
            Some(v) => serde_json::from_slice(v.value()).doing(doing),
            None => Ok((0, 0)),
        }
    }

    /// The memories holding `term`.
    pub fn memory_postings(&self, term: &str) -> Result<Vec<Posting>, StoreError> {
        let doing = || format!("reading the memory index for '{term}'");
        let txn = self.db.begin_read().doing(doing)?;
        let table = txn.open_table(MEMORY_TERMS).doing(doing)?;
        let mut out = Vec::new();
        for row in table.range((term, "")..(term, "\u{10FFFF}")).doing(doing)? {
            let (key, value) = row.doing(doing)?;
            let packed = value.value();
            out.push(Posting {
                id: key.value().1.to_owned(),
                tf: (packed >> 32) as u32,
                length: packed as u32,
            });
        }
        Ok(out)
    }

    /// Every memory that has a vector (a full scan: vector search is brute force).
    pub fn memories_with_vectors(&self) -> Result<Vec<MemoryEntry>, StoreError> {
        let doing = || "reading the memories' vectors".to_string();
        let txn = self.db.begin_read().doing(doing)?;
        let table = txn.open_table(MEMORIES).doing(doing)?;
        let mut out = Vec::new();
        for row in table.iter().doing(doing)? {
            let (_, value) = row.doing(doing)?;
            let entry: MemoryEntry = serde_json::from_slice(value.value()).doing(doing)?;
            if entry.embedding.is_some() {
                out.push(entry);
            }
        }
        Ok(out)
    }

    /// The memory `id`, if it exists.
    pub fn memory(&self, id: &str) -> Result<Option<MemoryEntry>, StoreError> {
        let doing = || format!("reading memory {id}");
        let txn = self.db.begin_read().doing(doing)?;
        let table = txn.open_table(MEMORIES).doing(doing)?;
        table
            .get(id)
            .doing(doing)?
            .map(|v| serde_json::from_slice(v.value()).doing(doing))
            .transpose()
    }
}
