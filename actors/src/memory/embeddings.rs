//! Embeddings from an OpenAI-compatible `/embeddings` endpoint, for hybrid memory search.

use crate::config::EmbeddingConfig;
use crate::provider::keys::ApiKeys;
use crate::provider::retry::{self, RetryPolicy};
use crate::provider::{http, ProviderError};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// Why texts could not be embedded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EmbedError {
    #[error("{0}")]
    Config(String),
    /// Every attempt failed (each is listed), or the one made could not succeed.
    #[error("the embeddings request failed: {0}")]
    Failed(ProviderError),
    #[error("the embeddings answer could not be read: {0}")]
    Malformed(String),
}

/// A client of the embeddings endpoint, retried like model calls.
#[derive(Clone)]
pub(crate) struct Embedder {
    http: reqwest::Client,
    url: String,
    model: String,
    keys: Arc<ApiKeys>,
    policy: RetryPolicy,
    timeout: Duration,
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Datum>,
}

#[derive(Deserialize)]
struct Datum {
    index: usize,
    embedding: Vec<f32>,
}

impl Embedder {
    /// The client `config` describes, retried as `policy` says within `timeout_secs`, or `None`
    /// when embeddings are off.
    pub(crate) fn from_config(
        config: &EmbeddingConfig,
        policy: &RetryPolicy,
    ) -> Result<Option<Self>, EmbedError> {
        match config.provider.as_str() {
            "" => return Ok(None),
            "openai" => {}
            other => {
                return Err(EmbedError::Config(format!(
                    "embedding.provider '{other}' is not known; use \"openai\" (any \
                     OpenAI-compatible endpoint) or leave it empty to turn embeddings off"
                )))
            }
        }
        let timeout = Duration::from_secs(config.timeout_secs.max(1));
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| EmbedError::Config(e.to_string()))?;
        Ok(Some(Self {
            http,
            url: format!("{}/embeddings", config.base_url.trim_end_matches('/')),
            model: config.model.clone(),
            keys: Arc::new(ApiKeys::new(
                &config.api_key,
                &config.api_keys,
                "embedding.api_key",
            )),
            policy: RetryPolicy {
                deadline: timeout,
                ..policy.clone()
            },
            timeout,
        }))
    }

    /// One vector per text, in order.
    pub(crate) async fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let body = retry::with_retries(&self.policy, "an embeddings request", || {
            self.attempt(texts)
        })
        .await
        .map_err(|e| match e {
            ProviderError::Config(message) => EmbedError::Config(message),
            other => EmbedError::Failed(other),
        })?;
        let mut answer: Answer =
            serde_json::from_slice(&body).map_err(|e| EmbedError::Malformed(e.to_string()))?;
        if answer.data.len() != texts.len() {
            return Err(EmbedError::Malformed(format!(
                "{} vectors for {} texts",
                answer.data.len(),
                texts.len()
            )));
        }
        answer.data.sort_by_key(|d| d.index);
        Ok(answer.data.into_iter().map(|d| d.embedding).collect())
    }

    /// One request; its body when the server answered with success.
    async fn attempt(&self, texts: &[&str]) -> Result<bytes::Bytes, ProviderError> {
        let request = self
            .http
            .post(&self.url)
            .json(&json!({"model": self.model, "input": texts}));
        let response = http::send(
            request,
            &self.keys,
            |r, key| r.bearer_auth(key),
            &self.url,
            self.timeout,
        )
        .await?;
        let transport = |e| http::transport_error(e, &self.url, self.timeout);
        response.bytes().await.map_err(transport)
    }
}

/// Cosine similarity, clamped to [0, 1] (opposite directions count as unrelated).
pub(crate) fn similarity(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    (dot / (na.sqrt() * nb.sqrt())).clamp(0.0, 1.0)
}
