//! The Anthropic provider: the Messages API (`/v1/messages`) with SSE streaming. The
//! conversation is mapped onto Anthropic's two roles and content blocks (`text`, `tool_use`,
//! `tool_result`), and its typed stream events are turned into [`StreamDelta`]s.

mod events;
mod request;
#[cfg(test)]
mod tests;

use super::endpoint::Endpoint;
use super::keys::ApiKeys;
use super::{ChatRequest, DeltaStream, Provider, ProviderError};
use crate::config::ModelConfig;
use async_trait::async_trait;
use events::EventParser;
use request::WireRequest;
use std::sync::Arc;

/// The API version every request names.
pub(crate) const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A client for one Anthropic Messages endpoint and model.
pub(crate) struct AnthropicProvider {
    endpoint: Endpoint,
    model: String,
    max_output_tokens: u32,
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
        Ok(Self {
            endpoint: Endpoint::new(config, "messages", keys)?,
            model: config.model.clone(),
            max_output_tokens,
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
        let body = crate::provider::sse::body(&wire)?;
        let versioned =
            |r: reqwest::RequestBuilder| r.header("anthropic-version", ANTHROPIC_VERSION);
        let authorize = |r: reqwest::RequestBuilder, key: &str| {
            match reqwest::header::HeaderValue::from_str(key) {
                Ok(mut value) => {
                    value.set_sensitive(true);
                    r.header("x-api-key", value)
                }
                // Sent without a key, the request is refused with a 401 that says so.
                Err(_) => r,
            }
        };
        (self.endpoint)
            .stream(body, versioned, authorize, decoder())
            .await
    }

    fn key_label(&self) -> String {
        self.endpoint.key_label()
    }

    fn runs_locally(&self) -> bool {
        self.endpoint.is_local()
    }
}

/// A decoder of one message's events.
pub(crate) fn decoder(
) -> impl FnMut(&str) -> Result<crate::provider::sse::Decoded, ProviderError> + Send + 'static {
    let mut parser = EventParser::default();
    move |data| parser.parse(data)
}
