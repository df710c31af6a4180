//! Memory: what agents choose to remember, across sessions, and how it is found again.
//!
//! `memory_write` stores an entry (through the store's writer, durable before the tool
//! answers); `memory_search` and the recall layer find entries by keyword, scored with
//! [`bm25`] over an inverted index in redb, merged with vector similarity when `[embedding]`
//! is configured. Vector search is a brute-force scan of the stored vectors.

pub(crate) mod embeddings;
mod tools;

use crate::provider::retry::RetryPolicy;
pub(crate) use embeddings::{EmbedError, Embedder};
pub(crate) use tools::with_memory_tools;

use crate::callback::Callback;
use crate::checkpoint::Checkpoint;
use crate::config::EmbeddingConfig;
use crate::ids::SessionId;
use crate::store::{now_ms, MemoryEntry, Store, StoreError, Write, WriteBatch};
use embeddings::similarity;
use std::collections::HashMap;

/// A memory found by a search.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Hit {
    pub entry: MemoryEntry,
    /// Relevance in [0, 1].
    pub score: f64,
}

/// What a search found, and whether it had to do without vectors.
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub hits: Vec<Hit>,
    /// Set when embeddings are configured but failed: the search was keyword-only.
    pub degraded: Option<String>,
}

/// The memory, as tools and the session reach it.
#[derive(Clone)]
pub(crate) struct Memory {
    store: Store,
    checkpoint: Checkpoint,
    embedder: Option<Embedder>,
    keyword_weight: f64,
    vector_weight: f64,
    floor: f64,
}

impl Memory {
    /// The memory in `store`, written through `checkpoint`, with vectors from `config` when it
    /// names a provider.
    pub(crate) fn new(
        store: Store,
        checkpoint: Checkpoint,
        config: &EmbeddingConfig,
        retries: &RetryPolicy,
    ) -> Result<Self, EmbedError> {
        Ok(Self {
            store,
            checkpoint,
            embedder: Embedder::from_config(config, retries)?,
            keyword_weight: config.keyword_weight,
            vector_weight: config.vector_weight,
            floor: config.relevance_floor,
        })
    }

    /// The least relevance a recalled memory has.
    pub(crate) fn relevance_floor(&self) -> f64 {
        self.floor
    }

    /// Stores a memory (with its vector, when embeddings answer); answers once it is durable,
    /// with a note when the vector could not be had.
    pub(crate) async fn write(
        &self,
        session_id: &SessionId,
        content: &str,
        tags: Vec<String>,
    ) -> Result<(MemoryEntry, Option<String>), StoreError> {
        let (embedding, degraded) = match &self.embedder {
            None => (None, None),
            Some(embedder) => match embedder.embed(&[content]).await {
                Ok(mut vectors) => (vectors.pop(), None),
                Err(e) => (
                    None,
                    Some(format!(
                        "stored without a vector ({e}); it is found by keyword only"
                    )),
                ),
            },
        };
        let entry = MemoryEntry {
            id: format!("m_{}", ulid::Ulid::new().to_string().to_lowercase()),
            content: content.to_owned(),
            tags,
            session_id: session_id.clone(),
            created_at_ms: now_ms(),
            embedding,
        };
        let batch = WriteBatch::of(session_id.clone(), [Write::Memory(entry.clone())]);
        let (done, durable) = tokio::sync::oneshot::channel();
        let notify = Callback::new(
            move |result| {
                // The writer of the memory may have gone (its run stopped): nothing to tell.
                done.send(result).ok();
            },
            || Err(crate::checkpoint::writer_gone()),
        );
        self.checkpoint.append(batch, notify);
        match durable.await {
            Ok(result) => result.map(|()| (entry, degraded)),
            Err(_) => Err(crate::checkpoint::writer_gone()),
        }
    }

    /// The `k` memories most relevant to `query`, best first, none under `floor`: by keyword
    /// (BM25), and when embeddings are configured, by `keyword_weight × keyword +
    /// vector_weight × similarity`. If the embeddings fail, the search is keyword-only and
    /// says so in [`Found::degraded`].
    pub(crate) async fn search(
        &self,
        query: &str,
        k: usize,
        floor: f64,
    ) -> Result<Found, StoreError> {
        let (query_vector, degraded) = match &self.embedder {
            None => (None, None),
            Some(embedder) => match embedder.embed(&[query]).await {
                Ok(mut vectors) => (vectors.pop(), None),
                Err(e) => (
                    None,
                    Some(format!(
                        "embeddings are configured but failed ({e}); this search was keyword-only"
                    )),
                ),
            },
        };
        let weights = (self.keyword_weight, self.vector_weight);
        let hits = hybrid_search(
            &self.store,
            query,
            query_vector.as_deref(),
            weights,
            k,
            floor,
        )
        .await?;
        Ok(Found { hits, degraded })
    }
}

/// BM25 over the stored index, merged with vector similarity when there is a query vector.
async fn hybrid_search(
    store: &Store,
    query: &str,
    query_vector: Option<&[f32]>,
    weights: (f64, f64),
    k: usize,
    floor: f64,
) -> Result<Vec<Hit>, StoreError> {
    let keyword = store.keyword_scores(query).await?;
    let with_vectors = match query_vector {
        Some(_) => store.memories_with_vectors().await?,
        None => Vec::new(),
    };
    let query_vector = query_vector.map(<[f32]>::to_vec);
    // Comparing with every stored vector is work that grows with the collection: it runs off
    // the async workers.
    let ranked = tokio::task::spawn_blocking(move || {
        rank(
            keyword,
            with_vectors,
            query_vector.as_deref(),
            weights,
            k,
            floor,
        )
    })
    .await
    .map_err(|e| StoreError::from_cause("ranking memories", e))?;
    let mut hits = Vec::with_capacity(ranked.len());
    for (id, (score, entry)) in ranked {
        let entry = match entry {
            Some(e) => Some(e),
            None => store.memory(&id).await?,
        };
        if let Some(entry) = entry {
            hits.push(Hit { entry, score });
        }
    }
    Ok(hits)
}

/// Memory ids with their score, and their entry when it was read already.
type Ranked = Vec<(String, (f64, Option<MemoryEntry>))>;

/// The `k` best of the memories scored by `keyword` and, with a query vector, by similarity
/// to `with_vectors`' vectors; none under `floor`.
fn rank(
    keyword: HashMap<String, f64>,
    with_vectors: Vec<MemoryEntry>,
    query_vector: Option<&[f32]>,
    (keyword_weight, vector_weight): (f64, f64),
    k: usize,
    floor: f64,
) -> Ranked {
    let mut scored: HashMap<String, (f64, Option<MemoryEntry>)> = HashMap::new();
    match query_vector {
        None => {
            for (id, s) in keyword {
                scored.insert(id, (s, None));
            }
        }
        Some(q) => {
            for entry in with_vectors {
                let vector = entry.embedding.as_deref().unwrap_or_default();
                let s = vector_weight * similarity(q, vector)
                    + keyword_weight * keyword.get(&entry.id).copied().unwrap_or(0.0);
                scored.insert(entry.id.clone(), (s, Some(entry)));
            }
            // An entry without a vector (written while embeddings were off or failing) has
            // only its keyword score: it stands for both parts, or it could never be recalled.
            for (id, s) in keyword {
                scored
                    .entry(id)
                    .or_insert(((keyword_weight + vector_weight) * s, None));
            }
        }
    }
    let mut ranked: Ranked = scored
        .into_iter()
        .filter(|(_, (s, _))| *s >= floor)
        .collect();
    ranked.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0).then_with(|| a.0.cmp(&b.0)));
    ranked.truncate(k);
    ranked
}
