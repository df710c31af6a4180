//! The Anthropic provider: the Messages API (`/v1/messages`) with SSE streaming. The
//! conversation is mapped onto Anthropic's two roles and content blocks (`text`, `tool_use`,
//! `tool_result`), and its typed stream events are turned into [`StreamDelta`]s.

mod events;
mod request;
#[cfg(test)]
mod tests;

use super::http::{self, SseEvents};
use super::keys::ApiKeys;
use super::{ChatRequest, DeltaStream, Provider, ProviderError, StreamDelta};
use crate::config::ModelConfig;
use async_trait::async_trait;
use events::EventParser;
use eventsource_stream::Eventsource;
use futures_util::{Stream, StreamExt};
use request::WireRequest;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// The API version every request names.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A client for one Anthropic Messages endpoint and model.
pub struct AnthropicProvider {
    http: reqwest::Client,
    url: String,
    model: String,
    keys: Arc<ApiKeys>,
    idle_timeout: Duration,
    max_output_tokens: u32,
}

impl AnthropicProvider {
    /// A provider for `config`'s endpoint and model, authenticating with `keys`; each answer
    /// may be at most `max_output_tokens` long (Anthropic requires the limit).
    pub fn new(
        config: &ModelConfig,
        keys: Arc<ApiKeys>,
        max_output_tokens: u32,
    ) -> Result<Self, ProviderError> {
        let (http, idle_timeout) = http::client(config)?;
        Ok(Self {
            http,
            url: format!("{}/messages", config.base_url.trim_end_matches('/')),
            model: config.model.clone(),
            keys,
            idle_timeout,
            max_output_tokens,
        })
    }
}

#[async_trait]
impl Provider for AnthropicProvider {
    fn model(&self) -> &str {
        &self.model
    }

    async fn stream(&self, request: &ChatRequest) -> Result<DeltaStream, ProviderError> {
        let key = self.keys.current()?;
        let wire = WireRequest::new(&self.model, self.max_output_tokens, request);
        let body = serde_json::to_vec(&wire)
            .map_err(|e| ProviderError::Config(format!("encoding the request: {e}")))?;
        let mut http = self
            .http
            .post(&self.url)
            .header("anthropic-version", ANTHROPIC_VERSION)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(body);
        if !key.secret.is_empty() {
            let mut value = reqwest::header::HeaderValue::from_str(&key.secret).map_err(|_| {
                ProviderError::Config("the API key is not a valid HTTP header value".into())
            })?;
            value.set_sensitive(true);
            http = http.header("x-api-key", value);
        }
        let response = http
            .send()
            .await
            .map_err(|e| http::transport_error(&e, &self.url, self.idle_timeout))?;
        if !response.status().is_success() {
            let error = http::error_from(response).await;
            if matches!(error, ProviderError::Http { status: 429, .. }) {
                self.keys.rotate_after(key.index);
            }
            return Err(error);
        }
        let events = response.bytes_stream().eventsource();
        Ok(Box::pin(sse_deltas(Box::pin(events), self.idle_timeout)))
    }

    fn key_label(&self) -> String {
        self.keys.label()
    }
}

// --- Streaming ---------------------------------------------------------------------------

struct SseState {
    events: SseEvents,
    parser: EventParser,
    pending: VecDeque<StreamDelta>,
    saw_stop: bool,
    done: bool,
    idle_timeout: Duration,
}

/// Turns SSE events into deltas. The stream ends after `message_stop`; a body that ends
/// without it is reported as cut.
fn sse_deltas(
    events: SseEvents,
    idle_timeout: Duration,
) -> impl Stream<Item = Result<StreamDelta, ProviderError>> + Send {
    let state = SseState {
        events,
        parser: EventParser::default(),
        pending: VecDeque::new(),
        saw_stop: false,
        done: false,
        idle_timeout,
    };
    futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(delta) = st.pending.pop_front() {
                return Some((Ok(delta), st));
            }
            if st.done {
                return None;
            }
            match st.events.next().await {
                None => {
                    st.done = true;
                    if !st.saw_stop {
                        let cut = ProviderError::StreamCut(
                            "the server closed the stream before message_stop".into(),
                        );
                        return Some((Err(cut), st));
                    }
                }
                Some(Err(e)) => {
                    st.done = true;
                    return Some((Err(http::sse_error(e, st.idle_timeout)), st));
                }
                Some(Ok(event)) => {
                    let data = event.data.trim();
                    if data.is_empty() {
                        continue;
                    }
                    match st.parser.parse(data) {
                        Ok(parsed) => {
                            st.pending.extend(parsed.deltas);
                            if parsed.stopped {
                                st.saw_stop = true;
                                st.done = true;
                            }
                        }
                        Err(e) => {
                            st.done = true;
                            return Some((Err(e), st));
                        }
                    }
                }
            }
        }
    })
}
