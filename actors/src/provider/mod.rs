//! Model providers: what a request holds, the deltas a streamed answer is made of, and the
//! errors a provider reports. A provider turns a [`ChatRequest`] into a stream of
//! [`StreamDelta`]s; [`ResponseAssembler`] turns those into one [`AssistantResponse`].

pub(crate) mod anthropic;
mod assembler;
#[cfg(feature = "testing")]
pub(crate) mod decode;
mod endpoint;
pub(crate) mod http;
pub(crate) mod keys;
pub(crate) mod openai;
pub(crate) mod overflow;
mod prefix;
mod probe;
pub(crate) mod recording;
pub(crate) mod replay;
pub(crate) mod responses;
pub(crate) mod retry;
pub(crate) mod sse;
pub(crate) mod wait_hint;

pub use assembler::{AssistantResponse, ResponseAssembler};
pub use prefix::EncodedPrefix;
pub use probe::{keys_set, probe};

use crate::config::{default_api_key, default_base_url, Fallback, ModelConfig};
use crate::message::{Message, Reasoning};
use async_trait::async_trait;
use futures_util::Stream;
use keys::ApiKeys;
use serde::{Deserialize, Serialize};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// A tool as the model is told about it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: serde_json::Value,
}

/// What is sent to the model. Cheap to clone: the history is shared, not copied.
#[derive(Clone, Debug)]
pub struct ChatRequest {
    pub system: Arc<str>,
    pub messages: Arc<Vec<Arc<Message>>>,
    pub tools: Arc<Vec<ToolSpec>>,
}

/// Token usage of one model call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    ToolCalls,
    Length,
    ContentFilter,
    Other(String),
}

impl FinishReason {
    /// Maps a provider's finish/stop reason.
    pub fn parse(reason: &str) -> Self {
        match reason {
            "stop" | "end_turn" | "stop_sequence" => FinishReason::Stop,
            "tool_calls" | "tool_use" | "function_call" => FinishReason::ToolCalls,
            "length" | "max_tokens" => FinishReason::Length,
            "content_filter" | "refusal" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_owned()),
        }
    }

    /// The reason as the OpenTelemetry GenAI conventions spell it.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::Length => "length",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Other(other) => other,
        }
    }
}

/// One piece of a streamed answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StreamDelta {
    /// Text to append to the answer.
    Text { text: String },
    /// Part of the tool call at `index`: whichever of its id, name and argument text this chunk
    /// carries. Servers split calls differently; the assembler merges them.
    ToolCall {
        index: usize,
        id: Option<String>,
        name: Option<String>,
        arguments: Option<String>,
    },
    /// The call's usage, as the server reports it.
    Usage { usage: Usage },
    /// The model stopped.
    Finish { reason: FinishReason },
    /// The server's id for this answer (for traces).
    ResponseId { id: String },
    /// A reasoning item, whole, to keep with the answer and pass back with it.
    Reasoning { item: Reasoning },
}

/// A streamed answer.
pub type DeltaStream = Pin<Box<dyn Stream<Item = Result<StreamDelta, ProviderError>> + Send>>;

/// A model provider.
#[async_trait]
pub trait Provider: Send + Sync + 'static {
    /// The model this provider asks, for events and logs.
    fn model(&self) -> &str;

    /// Starts a streamed answer to `request`.
    async fn stream(&self, request: &ChatRequest) -> Result<DeltaStream, ProviderError>;

    /// Starts a streamed answer to `request`, the next request of a run that passes the same
    /// `encoded` with each: a provider may keep there what it encoded, and encode only the
    /// messages added since. By default, [`Self::stream`]; a provider that wraps another
    /// passes `encoded` on to the wrapped one's, or its requests are encoded whole each time.
    async fn stream_continuing(
        &self,
        request: &ChatRequest,
        _encoded: &EncodedPrefix,
    ) -> Result<DeltaStream, ProviderError> {
        self.stream(request).await
    }

    /// Which of several API keys the next request carries ("key 2 of 3"), for the record of
    /// attempts; empty when there is only one.
    fn key_label(&self) -> String {
        String::new()
    }

    /// The model is served on this machine (its endpoint is on loopback): its calls cost
    /// nothing unless `[budget.pricing_overrides]` prices it.
    fn runs_locally(&self) -> bool {
        false
    }

    /// Whose API this is, as `gen_ai.provider.name` says it (`openai`, `anthropic`).
    fn provider_name(&self) -> &str {
        "ryvos.custom"
    }
}

/// The provider `[model]` describes: `"openai"` (any OpenAI-compatible endpoint),
/// `"openai-responses"` (the Responses API), `"anthropic"` (the Messages API) or `"replay"`
/// (answers from a recording made with `ryvos run --record`).
pub fn from_config(config: &ModelConfig) -> Result<Arc<dyn Provider>, ProviderError> {
    let config = with_provider_defaults(config);
    let keys = Arc::new(ApiKeys::new(
        &config.api_key,
        &config.api_keys,
        "model.api_key",
    ));
    build(&config, keys)
}

/// The primary provider, then one per `[model] fallbacks` entry, in the order they are tried.
/// Fallback models of the primary's own endpoint share its keys (and their rotation).
pub(crate) fn chain_from_config(
    config: &ModelConfig,
) -> Result<Vec<Arc<dyn Provider>>, ProviderError> {
    let primary = with_provider_defaults(config);
    let keys = Arc::new(ApiKeys::new(
        &primary.api_key,
        &primary.api_keys,
        "model.api_key",
    ));
    let mut chain = vec![build(&primary, keys.clone())?];
    for (i, fallback) in config.fallbacks.iter().enumerate() {
        let resolved = fallback.resolve(&primary);
        let provider = match fallback {
            Fallback::Model(_) => build(&resolved, keys.clone()),
            Fallback::Endpoint(_) => {
                let resolved = with_provider_defaults(&resolved);
                let keys = ApiKeys::new(
                    &resolved.api_key,
                    &resolved.api_keys,
                    "model.fallbacks.api_key",
                );
                build(&resolved, Arc::new(keys))
            }
        }
        .map_err(|e| {
            ProviderError::Config(format!("model.fallbacks[{i}] ({}): {e}", fallback.model()))
        })?;
        chain.push(provider);
    }
    Ok(chain)
}

/// `config` with the provider's own endpoint and key variable where the OpenAI defaults were
/// left in place, so `provider = "anthropic"` alone reaches Anthropic.
fn with_provider_defaults(config: &ModelConfig) -> ModelConfig {
    let mut config = config.clone();
    let openai = ModelConfig::default();
    if config.provider != openai.provider {
        if config.base_url == openai.base_url {
            config.base_url = default_base_url(&config.provider).to_owned();
        }
        if config.api_key == openai.api_key {
            config.api_key = default_api_key(&config.provider).to_owned();
        }
    }
    config
}

fn build(config: &ModelConfig, keys: Arc<ApiKeys>) -> Result<Arc<dyn Provider>, ProviderError> {
    match config.provider.as_str() {
        "openai" => Ok(Arc::new(openai::OpenAiProvider::new(config, keys)?)),
        "openai-responses" => Ok(Arc::new(responses::ResponsesProvider::new(config, keys)?)),
        "anthropic" => Ok(Arc::new(anthropic::AnthropicProvider::new(
            config,
            keys,
            config.max_output_tokens,
        )?)),
        "replay" => Ok(Arc::new(recording::ReplayProvider::open(
            std::path::Path::new(&config.replay_file),
            &config.model,
        )?)),
        other => Err(ProviderError::Config(format!(
            "unknown model provider '{other}' in [model] provider; use \"openai\" (any \
             OpenAI-compatible endpoint), \"openai-responses\" (the Responses API), \
             \"anthropic\" or \"replay\""
        ))),
    }
}

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// The server answered with an error status.
    #[error("the model server answered HTTP {status}: {message}")]
    Http {
        status: u16,
        message: String,
        /// The server's Retry-After, when it sent one.
        retry_after: Option<Duration>,
    },
    /// The server could not be reached.
    #[error("could not reach the model server: {0}")]
    Connect(String),
    /// The server reported an error inside the stream.
    #[error("the model server reported an error mid-stream: {0}")]
    Stream(String),
    /// The stream ended before the model finished.
    #[error("the model's stream was cut before it finished: {0}")]
    StreamCut(String),
    /// The stream stayed silent past its idle timeout.
    #[error("the model's stream was silent for longer than {0:?}")]
    IdleTimeout(Duration),
    /// A chunk could not be understood.
    #[error("the model server sent a malformed chunk ({reason}): {line}")]
    Malformed { line: String, reason: String },
    /// The provider is not set up right (an unset API key variable, an unknown provider).
    #[error("{0}")]
    Config(String),
    /// The request is larger than the model's context window: the conversation must be pruned,
    /// not the request repeated.
    #[error("the request exceeds the model's context window: {}", .0.message)]
    ContextOverflow(overflow::Overflow),
    /// Every attempt failed; each is listed, oldest first.
    #[error("{}", attempts(.0))]
    Exhausted(Vec<String>),
}

/// The failed attempts, oldest first, each failure told once for the attempts in a row that
/// failed the same way: "4 attempts failed: …", or "3 attempts failed: 1–2. …; 3. …".
fn attempts(failures: &[String]) -> String {
    let runs: Vec<&[String]> = failures.chunk_by(|a, b| a == b).collect();
    let told = match runs.as_slice() {
        [only] => only[0].clone(),
        _ => {
            // Attempts count from 1.
            let mut first = 1;
            let told = runs.iter().map(|run| {
                let last = first + run.len() - 1;
                let said = match run.len() {
                    1 => format!("{first}. {}", run[0]),
                    _ => format!("{first}–{last}. {}", run[0]),
                };
                first = last + 1;
                said
            });
            told.collect::<Vec<_>>().join("; ")
        }
    };
    match failures.len() {
        1 => format!("1 attempt failed: {told}"),
        n => format!("{n} attempts failed: {told}"),
    }
}

/// What servers say, lowercased, when they answer a request with a server error they will give
/// it every time: llama.cpp's server parses the history and renders it with the model's chat
/// template, and answers HTTP 500 when either fails, or when the model's output does not match
/// the template's tool-call format.
const DETERMINISTIC_SERVER_ERRORS: &[&str] = &[
    "failed to parse",
    "cannot have 2 or more assistant messages",
    "expected 'content' to be",
    "tool call without",
    "unable to generate parser",
    "error rendering template",
    "chat template",
];

/// Whether a server error's text says the request itself cannot be served (so trying it again,
/// now or after a resume, fails the same way).
fn refuses_the_request(message: &str) -> bool {
    let message = message.to_lowercase();
    DETERMINISTIC_SERVER_ERRORS
        .iter()
        .any(|sign| message.contains(sign))
}

/// What to do about a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// Transient: try again after a backoff (or the wait the server asked for).
    Retry,
    /// Trying again would fail the same way.
    FailFast,
    /// The conversation must shrink first.
    Prune,
}

impl ProviderError {
    /// A request that could not be encoded as JSON.
    pub(crate) fn encoding(e: serde_json::Error) -> Self {
        ProviderError::Config(format!("encoding the request: {e}"))
    }

    /// What kind of failure this is, as a span's `error.type` says it.
    pub fn kind(&self) -> &'static str {
        match self {
            ProviderError::Http { .. } => "http_error",
            ProviderError::Connect(_) => "connect_error",
            ProviderError::Stream(_) => "stream_error",
            ProviderError::StreamCut(_) => "stream_cut",
            ProviderError::IdleTimeout(_) => "timeout",
            ProviderError::Malformed { .. } => "malformed_response",
            ProviderError::Config(_) => "config_error",
            ProviderError::ContextOverflow(_) => "context_overflow",
            ProviderError::Exhausted(_) => "exhausted",
        }
    }

    /// Whether the failure is worth another attempt, as the providers' own SDKs decide: rate
    /// limits, overloads, server errors (500 included: a real provider's transient 500 says
    /// the same thing every time), dropped connections and timeouts are retried with the full
    /// policy. Given up on at once: other 4xx, and a server error whose text is one a server
    /// sends for a request it can never accept (see [`refuses_the_request`]).
    pub fn recovery(&self) -> Recovery {
        match self {
            ProviderError::Http {
                status, message, ..
            } => match status {
                500 if refuses_the_request(message) => Recovery::FailFast,
                408 | 409 | 425 | 429 | 500 | 502 | 503 | 504 | 529 => Recovery::Retry,
                _ => Recovery::FailFast,
            },
            ProviderError::Stream(message) if refuses_the_request(message) => Recovery::FailFast,
            ProviderError::Connect(_)
            | ProviderError::Stream(_)
            | ProviderError::StreamCut(_)
            | ProviderError::IdleTimeout(_) => Recovery::Retry,
            ProviderError::ContextOverflow(_) => Recovery::Prune,
            ProviderError::Malformed { .. }
            | ProviderError::Config(_)
            | ProviderError::Exhausted(_) => Recovery::FailFast,
        }
    }

    /// The wait the server asked for, if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, message: &str) -> ProviderError {
        ProviderError::Http {
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    #[test]
    fn server_errors_are_retried_unless_they_refuse_the_request_itself() {
        let openai = "The server had an error while processing your request";
        assert_eq!(http(500, openai).recovery(), Recovery::Retry);
        assert_eq!(http(503, "overloaded").recovery(), Recovery::Retry);
        assert_eq!(http(429, "slow down").recovery(), Recovery::Retry);
        assert_eq!(http(404, "no such model").recovery(), Recovery::FailFast);
        let llama = "Failed to parse tool call arguments as JSON: {";
        assert_eq!(http(500, llama).recovery(), Recovery::FailFast);
        let template = "Cannot have 2 or more assistant messages at the end of the list.";
        assert_eq!(http(500, template).recovery(), Recovery::FailFast);
        let stream = ProviderError::Stream("Failed to parse input at pos 12".into());
        assert_eq!(stream.recovery(), Recovery::FailFast);
        let stream = ProviderError::Stream("server_error: try again".into());
        assert_eq!(stream.recovery(), Recovery::Retry);
    }

    #[test]
    fn attempts_that_failed_alike_are_told_once() {
        let same = vec!["x: refused".to_owned(); 4];
        assert_eq!(
            ProviderError::Exhausted(same).to_string(),
            "4 attempts failed: x: refused"
        );
        let mixed = ["x: refused", "x: refused", "y: HTTP 503"]
            .map(str::to_owned)
            .to_vec();
        assert_eq!(
            ProviderError::Exhausted(mixed).to_string(),
            "3 attempts failed: 1–2. x: refused; 3. y: HTTP 503"
        );
    }
}
