//! Embeddings from an OpenAI-compatible `/embeddings` endpoint, for hybrid memory search.

use crate::config::{expand_env, EmbeddingConfig};
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

/// Why texts could not be embedded.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("{0}")]
    Config(String),
    #[error("the embeddings request failed: {0}")]
    Http(String),
    #[error("the embeddings server answered {status}: {message}")]
    Status { status: u16, message: String },
    #[error("the embeddings answer could not be read: {0}")]
    Malformed(String),
}

/// A client of the embeddings endpoint.
#[derive(Clone)]
pub struct Embedder {
    http: reqwest::Client,
    url: String,
    model: String,
    api_key: String,
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
    /// The client `config` describes, or `None` when embeddings are off.
    pub fn from_config(config: &EmbeddingConfig) -> Result<Option<Self>, EmbedError> {
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
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(config.timeout_secs.max(1)))
            .build()
            .map_err(|e| EmbedError::Config(e.to_string()))?;
        Ok(Some(Self {
            http,
            url: format!("{}/embeddings", config.base_url.trim_end_matches('/')),
            model: config.model.clone(),
            api_key: config.api_key.clone(),
        }))
    }

    /// One vector per text, in order.
    pub async fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let key = expand_env(&self.api_key, "embedding.api_key")
            .map_err(|e| EmbedError::Config(e.to_string()))?;
        let mut request = self
            .http
            .post(&self.url)
            .json(&json!({"model": self.model, "input": texts}));
        if !key.is_empty() {
            request = request.bearer_auth(key);
        }
        let response = request
            .send()
            .await
            .map_err(|e| EmbedError::Http(e.without_url().to_string()))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| EmbedError::Http(e.without_url().to_string()))?;
        if !status.is_success() {
            return Err(EmbedError::Status {
                status: status.as_u16(),
                message: String::from_utf8_lossy(&body).chars().take(300).collect(),
            });
        }
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
}

/// Cosine similarity, clamped to [0, 1] (opposite directions count as unrelated).
pub fn similarity(a: &[f32], b: &[f32]) -> f64 {
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
