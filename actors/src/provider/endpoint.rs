//! One model endpoint as a streaming provider reaches it: its client, URL, keys and idle
//! timeout, and the request every provider makes of it (a JSON body posted for an SSE answer).

use super::http;
use super::keys::ApiKeys;
use super::sse::{self, Decoded};
use super::{DeltaStream, ProviderError};
use crate::config::ModelConfig;
use reqwest::RequestBuilder;
use std::sync::Arc;
use std::time::Duration;

/// See the module documentation.
pub(crate) struct Endpoint {
    http: reqwest::Client,
    url: String,
    keys: Arc<ApiKeys>,
    idle_timeout: Duration,
    /// The endpoint is on loopback.
    local: bool,
}

impl Endpoint {
    /// `config`'s endpoint at `path` (`chat/completions`, `messages`, `responses`), reached
    /// with `keys`.
    pub(crate) fn new(
        config: &ModelConfig,
        path: &str,
        keys: Arc<ApiKeys>,
    ) -> Result<Self, ProviderError> {
        let (http, idle_timeout) = http::client(config)?;
        Ok(Self {
            http,
            url: format!("{}/{path}", config.base_url.trim_end_matches('/')),
            keys,
            idle_timeout,
            local: http::is_loopback(&config.base_url),
        })
    }

    /// Posts the JSON `body` for a streamed answer, with what `prepare` adds (headers) and the
    /// key put on by `authorize`; the answer's events decoded by `decode`.
    pub(crate) async fn stream<D>(
        &self,
        body: Vec<u8>,
        prepare: impl FnOnce(RequestBuilder) -> RequestBuilder,
        authorize: impl FnOnce(RequestBuilder, &str) -> RequestBuilder,
        decode: D,
    ) -> Result<DeltaStream, ProviderError>
    where
        D: FnMut(&str) -> Result<Decoded, ProviderError> + Send + 'static,
    {
        let request = self
            .http
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(body);
        let response = http::send(
            prepare(request),
            &self.keys,
            authorize,
            &self.url,
            self.idle_timeout,
        )
        .await?;
        Ok(sse::deltas(response, self.idle_timeout, decode))
    }

    /// Which of several keys the next request carries ("key 2 of 3"); empty for one.
    pub(crate) fn key_label(&self) -> String {
        self.keys.label()
    }

    /// The endpoint is on this machine.
    pub(crate) fn is_local(&self) -> bool {
        self.local
    }
}

/// Puts `key` on `request` as a bearer token (OpenAI's APIs).
pub(crate) fn bearer(request: RequestBuilder, key: &str) -> RequestBuilder {
    request.bearer_auth(key)
}
