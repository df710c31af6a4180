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

/// What a keyword search reads of the index, from one snapshot.
pub struct KeywordIndex {
    /// How many memories there are.
    pub docs: u64,
    /// Their total length in terms.
    pub total_length: u64,
    /// For each term asked for, in order, the memories holding it.
    pub postings: Vec<Vec<Posting>>,
}

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
        let replaced = memories
            .insert(entry.id.as_str(), row.as_slice())
            .map_err(|e| e.to_string())?
            .map(|old| serde_json::from_slice::<MemoryEntry>(old.value()))
            .transpose()
            .map_err(|e| e.to_string())?;
        // A rewritten entry leaves the index before it enters it again.
        if let Some(old) = replaced {
            let words = indexed_terms(&old);
            for term in &words {
                postings
                    .remove((term.as_str(), old.id.as_str()))
                    .map_err(|e| e.to_string())?;
            }
            count = count.saturating_sub(1);
            total = total.saturating_sub(words.len() as u64);
        }
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
    /// The keyword index as one snapshot: the collection's size and each term's postings.
    pub fn memory_index(&self, terms: &[String]) -> Result<KeywordIndex, StoreError> {
        let doing = || "reading the memory index".to_string();
        let txn = self.db.begin_read().doing(doing)?;
        let stats = txn.open_table(MEMORY_STATS).doing(doing)?;
        let (docs, total_length) = match stats.get(TOTALS).doing(doing)? {
            Some(v) => serde_json::from_slice(v.value()).doing(doing)?,
            None => (0, 0),
        };
        let table = txn.open_table(MEMORY_TERMS).doing(doing)?;
        let mut postings = Vec::with_capacity(terms.len());
        for term in terms {
            let mut found = Vec::new();
            for row in table
                .range((term.as_str(), "")..(term.as_str(), "\u{10FFFF}"))
                .doing(doing)?
            {
                let (key, value) = row.doing(doing)?;
                let packed = value.value();
                found.push(Posting {
                    id: key.value().1.to_owned(),
                    tf: (packed >> 32) as u32,
                    length: packed as u32,
                });
            }
            postings.push(found);
        }
        Ok(KeywordIndex {
            docs,
            total_length,
            postings,
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::SessionId;

    fn entry(id: &str, content: &str) -> MemoryEntry {
        MemoryEntry {
            id: id.into(),
            content: content.into(),
            tags: Vec::new(),
            session_id: SessionId::new("s"),
            created_at_ms: 0,
            embedding: None,
        }
    }

    fn write(store: &Store, entries: &[MemoryEntry]) {
        let txn = store.db.begin_write().unwrap();
        index(&txn, entries.iter()).unwrap();
        txn.commit().unwrap();
    }

    #[test]
    fn a_rewritten_entry_replaces_its_postings_and_counts_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.redb"), false).unwrap();
        write(&store, &[entry("m1", "alpha beta"), entry("m2", "gamma")]);
        write(&store, &[entry("m1", "delta")]);
        let terms: Vec<String> = ["alpha", "delta", "gamma"].map(String::from).into();
        let index = store.memory_index(&terms).unwrap();
        assert_eq!((index.docs, index.total_length), (2, 2));
        assert!(index.postings[0].is_empty(), "the old content is unindexed");
        assert_eq!(index.postings[1][0].id, "m1");
        assert_eq!(index.postings[2][0].id, "m2");
    }
}
