//! Model providers: what a request holds, the deltas a streamed answer is made of, and the
//! errors a provider reports. A provider turns a [`ChatRequest`] into a stream of
//! [`StreamDelta`]s; [`ResponseAssembler`] turns those into one [`AssistantResponse`].

mod assembler;
pub mod openai;
pub mod recording;

pub use assembler::{AssistantResponse, ResponseAssembler};

use crate::message::Message;
use async_trait::async_trait;
use futures_util::Stream;
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
}

/// The provider `[model]` describes: `"openai"` (any OpenAI-compatible endpoint) or
/// `"replay"` (answers from a recording made with `ryvos run --record`).
pub fn from_config(
    config: &crate::config::ModelConfig,
) -> Result<Arc<dyn Provider>, ProviderError> {
    match config.provider.as_str() {
        "openai" => Ok(Arc::new(openai::OpenAiProvider::new(config)?)),
        "replay" => Ok(Arc::new(recording::ReplayProvider::open(
            std::path::Path::new(&config.replay_file),
            &config.model,
        )?)),
        other => Err(ProviderError::Config(format!(
            "unknown model provider '{other}' in [model] provider; use \"openai\" (any \
             OpenAI-compatible endpoint) or \"replay\""
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
}
