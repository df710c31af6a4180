//! The Responses provider: OpenAI's Responses API (`/v1/responses`), and servers that follow
//! the Open Responses specification, with SSE streaming. Nothing is stored on the server
//! (`store: false`); the reasoning items an answer comes with are asked for encrypted, kept in
//! Ryvos's own history with the answer, and passed back with it, so reasoning models keep their
//! reasoning between turns.

mod events;
mod request;
#[cfg(test)]
mod tests;

use super::http;
use super::keys::ApiKeys;
use super::sse;
use super::{ChatRequest, DeltaStream, Provider, ProviderError};
use crate::config::ModelConfig;
use async_trait::async_trait;
use events::EventParser;
use request::WireRequest;
use std::sync::Arc;
use std::time::Duration;

/// A client for one Responses endpoint and model.
pub(crate) struct ResponsesProvider {
    http: reqwest::Client,
    url: String,
    model: String,
    keys: Arc<ApiKeys>,
    idle_timeout: Duration,
    max_output_tokens: u32,
    /// The endpoint is on loopback.
    local: bool,
}

impl ResponsesProvider {
    /// A provider for `config`'s endpoint and model, authenticating with `keys`.
    pub(crate) fn new(config: &ModelConfig, keys: Arc<ApiKeys>) -> Result<Self, ProviderError> {
        let (http, idle_timeout) = http::client(config)?;
        Ok(Self {
            http,
            url: format!("{}/responses", config.base_url.trim_end_matches('/')),
            model: config.model.clone(),
            keys,
            idle_timeout,
            max_output_tokens: config.max_output_tokens,
            local: http::is_loopback(&config.base_url),
        })
    }
}

#[async_trait]
impl Provider for ResponsesProvider {
    fn provider_name(&self) -> &str {
        "openai"
    }

    fn model(&self) -> &str {
        &self.model
    }

    async fn stream(&self, request: &ChatRequest) -> Result<DeltaStream, ProviderError> {
        let wire = WireRequest::new(&self.model, self.max_output_tokens, request);
        let body = serde_json::to_vec(&wire)
            .map_err(|e| ProviderError::Config(format!("encoding the request: {e}")))?;
        let http = self
            .http
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(body);
        let response = http::send(
            http,
            &self.keys,
            |r, key| r.bearer_auth(key),
            &self.url,
            self.idle_timeout,
        )
        .await?;
        Ok(sse::deltas(response, self.idle_timeout, decoder()))
    }

    fn key_label(&self) -> String {
        self.keys.label()
    }

    fn runs_locally(&self) -> bool {
        self.local
    }
}

/// A decoder of one response's events.
pub(crate) fn decoder(
) -> impl FnMut(&str) -> Result<crate::provider::sse::Decoded, ProviderError> + Send + 'static {
    let mut parser = EventParser::default();
    move |data| parser.parse(data)
}
