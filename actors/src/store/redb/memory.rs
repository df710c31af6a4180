//! The memory tables: entries, their keyword index, and the collection's size; and the keyword
//! half of memory search, BM25 over that index.
//!
//! Written only inside the writer's transaction (with the rest of a group commit); read from
//! anywhere, like every table.

use super::tables::{MEMORIES, MEMORY_STATS, MEMORY_TERMS};
use crate::store::bm25::{self, Posting};
use crate::store::terms::{indexed_terms, terms};
use crate::store::{Context, StoreError};
use redb::{Database, ReadableDatabase};
use ryvos_protocol::records::MemoryEntry;
use std::collections::{BTreeMap, HashMap, HashSet};

const TOTALS: &str = "totals";

/// Stores `entries` and their postings, and updates the collection's size.
pub(super) fn index<'a>(
    txn: &redb::WriteTransaction,
    entries: impl Iterator<Item = &'a MemoryEntry>,
) -> Result<(), StoreError> {
    let doing = || "indexing memories".to_string();
    let mut memories = MEMORIES.open(txn, doing)?;
    let mut postings = txn.open_table(MEMORY_TERMS).doing(doing)?;
    let mut stats = MEMORY_STATS.open(txn, doing)?;
    let (mut count, mut total) = stats.get(TOTALS, doing)?.unwrap_or((0, 0));
    for entry in entries {
        // A rewritten entry leaves the index before it enters it again.
        if let Some(old) = memories.insert(entry.id.as_str(), entry, doing)? {
            let words = indexed_terms(&old);
            for term in &words {
                postings
                    .remove((term.as_str(), old.id.as_str()))
                    .doing(doing)?;
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
                .doing(doing)?;
        }
        count += 1;
        total += u64::from(length);
    }
    stats.insert(TOTALS, &(count, total), doing)?;
    Ok(())
}

/// Each memory's BM25 score for `query`, normalized to 0–1, from one snapshot of the index.
pub(super) fn keyword_scores(
    db: &Database,
    query: &str,
) -> Result<HashMap<String, f64>, StoreError> {
    let doing = || "reading the memory index".to_string();
    let mut seen = HashSet::new();
    let query_terms: Vec<String> = terms(query)
        .into_iter()
        .filter(|t| seen.insert(t.clone()))
        .collect();
    let txn = db.begin_read().doing(doing)?;
    let (docs, total_length) = MEMORY_STATS.get(&txn, TOTALS, doing)?.unwrap_or((0, 0));
    if docs == 0 {
        return Ok(HashMap::new());
    }
    let table = txn.open_table(MEMORY_TERMS).doing(doing)?;
    let mut postings = Vec::with_capacity(query_terms.len());
    for term in &query_terms {
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
    let average_length = total_length as f64 / docs as f64;
    Ok(bm25::score(&postings, docs, average_length)
        .into_iter()
        .map(|(id, s)| (id, bm25::normalized(s)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::RedbStore;
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

    fn write(store: &RedbStore, entries: &[MemoryEntry]) {
        let txn = store.db().unwrap().begin_write().unwrap();
        index(&txn, entries.iter()).unwrap();
        txn.commit().unwrap();
    }

    #[test]
    fn a_rewritten_entry_replaces_its_postings_and_counts_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStore::open(&dir.path().join("t.redb"), false).unwrap();
        write(&store, &[entry("m1", "alpha beta"), entry("m2", "gamma")]);
        write(&store, &[entry("m1", "delta")]);
        let txn = store.db().unwrap().begin_read().unwrap();
        let totals = MEMORY_STATS.get(&txn, TOTALS, String::new).unwrap();
        assert_eq!(totals, Some((2, 2)));
        let found = |query| {
            let mut ids: Vec<String> = keyword_scores(&store.db().unwrap(), query)
                .unwrap()
                .into_keys()
                .collect();
            ids.sort();
            ids
        };
        assert!(found("alpha").is_empty(), "the old content is unindexed");
        assert_eq!(found("delta"), ["m1"]);
        assert_eq!(found("gamma delta"), ["m1", "m2"]);
    }
}
