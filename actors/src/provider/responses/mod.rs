//! The Responses provider: OpenAI's Responses API (`/v1/responses`), and servers that follow
//! the Open Responses specification, with SSE streaming. Nothing is stored on the server
//! (`store: false`); the reasoning items an answer comes with are asked for encrypted, kept in
//! Ryvos's own history with the answer, and passed back with it, so reasoning models keep their
//! reasoning between turns.

mod events;
mod request;
#[cfg(test)]
mod tests;

use super::endpoint::{bearer, Endpoint};
use super::keys::ApiKeys;
use super::{ChatRequest, DeltaStream, Provider, ProviderError};
use crate::config::ModelConfig;
use async_trait::async_trait;
use events::EventParser;
use request::WireRequest;
use std::sync::Arc;

/// A client for one Responses endpoint and model.
pub(crate) struct ResponsesProvider {
    endpoint: Endpoint,
    model: String,
    max_output_tokens: u32,
}

impl ResponsesProvider {
    /// A provider for `config`'s endpoint and model, authenticating with `keys`.
    pub(crate) fn new(config: &ModelConfig, keys: Arc<ApiKeys>) -> Result<Self, ProviderError> {
        Ok(Self {
            endpoint: Endpoint::new(config, "responses", keys)?,
            model: config.model.clone(),
            max_output_tokens: config.max_output_tokens,
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
        let body = crate::provider::sse::body(&wire)?;
        let decoder = decoder(self.max_output_tokens);
        (self.endpoint).stream(body, |r| r, bearer, decoder).await
    }

    fn key_label(&self) -> String {
        self.endpoint.key_label()
    }

    fn runs_locally(&self) -> bool {
        self.endpoint.is_local()
    }
}

/// A decoder of one response's events, asked for at most `max_output_tokens` (0: no limit).
pub(crate) fn decoder(
    max_output_tokens: u32,
) -> impl FnMut(&str) -> Result<crate::provider::sse::Decoded, ProviderError> + Send + 'static {
    let mut parser = EventParser::limited_to(max_output_tokens);
    move |data| parser.parse(data)
}
