//! Memory: what agents choose to remember, across sessions, and how it is found again.
//!
//! `memory_write` stores an entry (through the CheckpointActor, durable before the tool
//! answers); `memory_search` and the recall layer find entries by keyword, scored with
//! [`bm25`] over an inverted index in redb.

pub mod bm25;
pub mod terms;
mod tools;

pub use tools::{MemorySearch, MemoryWrite};

use crate::callback::Callback;
use crate::checkpoint::CheckpointMsg;
use crate::ids::SessionId;
use crate::store::{now_ms, MemoryEntry, Store, StoreError, WriteBatch};
use crate::supervision::ChildSlot;
use std::collections::HashSet;

/// A memory found by a search.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    pub entry: MemoryEntry,
    /// Relevance in [0, 1).
    pub score: f64,
}

/// The memory, as tools and the session reach it.
#[derive(Clone)]
pub struct Memory {
    store: Store,
    checkpoint: ChildSlot<CheckpointMsg>,
}

impl Memory {
    pub fn new(store: Store, checkpoint: ChildSlot<CheckpointMsg>) -> Self {
        Self { store, checkpoint }
    }

    /// Stores a memory; answers once it is durable.
    pub async fn write(
        &self,
        session_id: &SessionId,
        content: &str,
        tags: Vec<String>,
    ) -> Result<MemoryEntry, StoreError> {
        let entry = MemoryEntry {
            id: format!("m_{}", ulid::Ulid::new().to_string().to_lowercase()),
            content: content.to_owned(),
            tags,
            session_id: session_id.clone(),
            created_at_ms: now_ms(),
        };
        let mut batch = WriteBatch::new(session_id.clone());
        batch.memories.push(entry.clone());
        let (done, durable) = tokio::sync::oneshot::channel();
        let notify = Callback::new(
            move |result| {
                // The writer of the memory may have gone (its run stopped): nothing to tell.
                done.send(result).ok();
            },
            || Err(crate::checkpoint::writer_gone()),
        );
        self.checkpoint
            .cast(CheckpointMsg::Append {
                batch: Box::new(batch),
                notify,
            })
            .map_err(|e| StoreError::from_cause("storing a memory", e))?;
        match durable.await {
            Ok(result) => result.map(|()| entry),
            Err(_) => Err(crate::checkpoint::writer_gone()),
        }
    }

    /// The `k` memories that match `query` best, by keyword, most relevant first, none scoring
    /// under `floor`.
    pub async fn search(&self, query: &str, k: usize, floor: f64) -> Result<Vec<Hit>, StoreError> {
        let store = self.store.clone();
        let query = query.to_owned();
        tokio::task::spawn_blocking(move || keyword_search(&store, &query, k, floor))
            .await
            .map_err(|e| StoreError::from_cause("searching the memory", e))?
    }
}

/// BM25 over the stored index.
fn keyword_search(
    store: &Store,
    query: &str,
    k: usize,
    floor: f64,
) -> Result<Vec<Hit>, StoreError> {
    let mut seen = HashSet::new();
    let query_terms: Vec<String> = terms::terms(query)
        .into_iter()
        .filter(|t| seen.insert(t.clone()))
        .collect();
    if query_terms.is_empty() {
        return Ok(Vec::new());
    }
    let (docs, total_length) = store.memory_totals()?;
    if docs == 0 {
        return Ok(Vec::new());
    }
    let postings = query_terms
        .iter()
        .map(|t| store.memory_postings(t))
        .collect::<Result<Vec<_>, _>>()?;
    let scores = bm25::score(&postings, docs, total_length as f64 / docs as f64);
    let mut ranked: Vec<(String, f64)> = scores
        .into_iter()
        .map(|(id, s)| (id, bm25::normalized(s)))
        .filter(|(_, s)| *s >= floor)
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked.truncate(k);
    let mut hits = Vec::with_capacity(ranked.len());
    for (id, score) in ranked {
        if let Some(entry) = store.memory(&id)? {
            hits.push(Hit { entry, score });
        }
    }
    Ok(hits)
}
