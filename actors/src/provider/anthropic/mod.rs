//! The Anthropic provider: the Messages API (`/v1/messages`) with SSE streaming. The
//! conversation is mapped onto Anthropic's two roles and content blocks (`text`, `tool_use`,
//! `tool_result`), and its typed stream events are turned into [`StreamDelta`]s.

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

/// The API version every request names.
pub(crate) const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A client for one Anthropic Messages endpoint and model.
pub(crate) struct AnthropicProvider {
    http: reqwest::Client,
    url: String,
    model: String,
    keys: Arc<ApiKeys>,
    idle_timeout: Duration,
    max_output_tokens: u32,
    /// The endpoint is on loopback.
    local: bool,
}

impl AnthropicProvider {
    /// A provider for `config`'s endpoint and model, authenticating with `keys`; each answer
    /// may be at most `max_output_tokens` long (Anthropic requires the limit).
    pub(crate) fn new(
        config: &ModelConfig,
        keys: Arc<ApiKeys>,
        max_output_tokens: u32,
    ) -> Result<Self, ProviderError> {
        if max_output_tokens == 0 {
            return Err(ProviderError::Config(
                "[model] max_output_tokens = 0 leaves Anthropic's Messages API without the \
                 output limit it requires; set a limit such as 8192"
                    .to_owned(),
            ));
        }
        let (http, idle_timeout) = http::client(config)?;
        Ok(Self {
            http,
            url: format!("{}/messages", config.base_url.trim_end_matches('/')),
            model: config.model.clone(),
            keys,
            idle_timeout,
            max_output_tokens,
            local: http::is_loopback(&config.base_url),
        })
    }
}

#[async_trait]
impl Provider for AnthropicProvider {
    fn provider_name(&self) -> &str {
        "anthropic"
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
            .header("anthropic-version", ANTHROPIC_VERSION)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(body);
        let response = http::send(
            http,
            &self.keys,
            |r, key| match reqwest::header::HeaderValue::from_str(key) {
                Ok(mut value) => {
                    value.set_sensitive(true);
                    r.header("x-api-key", value)
                }
                // Sent without a key, the request is refused with a 401 that says so.
                Err(_) => r,
            },
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

/// A decoder of one message's events.
pub(crate) fn decoder(
) -> impl FnMut(&str) -> Result<crate::provider::sse::Decoded, ProviderError> + Send + 'static {
    let mut parser = EventParser::default();
    move |data| parser.parse(data)
}
