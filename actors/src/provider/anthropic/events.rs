//! Anthropic's typed stream events (`message_start`, `content_block_*`, `message_delta`,
//! `message_stop`, `ping`, `error`) turned into [`StreamDelta`]s.

use crate::provider::sse::Decoded;
use crate::provider::{FinishReason, ProviderError, StreamDelta, Usage};
use serde::Deserialize;
use std::collections::HashSet;

/// Reads the events of one streamed message, keeping what later events need: the input
/// tokens `message_start` reported, and which blocks are tool calls and got input.
#[derive(Default)]
pub(super) struct EventParser {
    input_tokens: u64,
    /// Indexes of the `tool_use` blocks started and not yet stopped.
    tool_blocks: HashSet<usize>,
    /// Indexes of the `tool_use` blocks that received some input.
    tool_blocks_with_input: HashSet<usize>,
}

impl EventParser {
    /// Parses one `data:` payload.
    ///
    /// Long because it is a table: an arm per event type of the Messages stream, each turning
    /// its payload into the deltas it carries.
    pub(super) fn parse(&mut self, data: &str) -> Result<Decoded, ProviderError> {
        let event: WireEvent = crate::provider::sse::payload(data)?;
        let mut parsed = Decoded::default();
        match event {
            WireEvent::MessageStart { message } => {
                if let Some(id) = message.id.filter(|i| !i.is_empty()) {
                    parsed.deltas.push(StreamDelta::ResponseId { id });
                }
                if let Some(usage) = message.usage {
                    // Cached prompt tokens are reported apart; the prompt is all of them.
                    self.input_tokens = usage.input_tokens.unwrap_or(0)
                        + usage.cache_creation_input_tokens.unwrap_or(0)
                        + usage.cache_read_input_tokens.unwrap_or(0);
                }
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => match content_block {
                WireBlockStart::Text { text } => {
                    if !text.is_empty() {
                        parsed.deltas.push(StreamDelta::Text { text });
                    }
                }
                WireBlockStart::ToolUse { id, name, input } => {
                    self.tool_blocks.insert(index);
                    // The input normally streams as `input_json_delta`s; a server that sends it
                    // whole at the start is taken at its word.
                    let arguments = input
                        .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                        .map(|i| i.to_string());
                    if arguments.is_some() {
                        self.tool_blocks_with_input.insert(index);
                    }
                    parsed.deltas.push(StreamDelta::ToolCall {
                        index,
                        id: Some(id).filter(|i| !i.is_empty()),
                        name: Some(name).filter(|n| !n.is_empty()),
                        arguments,
                    });
                }
                WireBlockStart::Other => {}
            },
            WireEvent::ContentBlockDelta { index, delta } => match delta {
                WireBlockDelta::TextDelta { text } => {
                    if !text.is_empty() {
                        parsed.deltas.push(StreamDelta::Text { text });
                    }
                }
                WireBlockDelta::InputJsonDelta { partial_json } => {
                    if !partial_json.is_empty() && self.tool_blocks.contains(&index) {
                        self.tool_blocks_with_input.insert(index);
                        parsed.deltas.push(StreamDelta::ToolCall {
                            index,
                            id: None,
                            name: None,
                            arguments: Some(partial_json),
                        });
                    }
                }
                WireBlockDelta::Other => {}
            },
            WireEvent::ContentBlockStop { index } => {
                if self.tool_blocks.remove(&index) && !self.tool_blocks_with_input.contains(&index)
                {
                    // A call without arguments: its input is the empty object.
                    parsed.deltas.push(StreamDelta::ToolCall {
                        index,
                        id: None,
                        name: None,
                        arguments: Some("{}".into()),
                    });
                }
            }
            WireEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    parsed.deltas.push(StreamDelta::Finish {
                        reason: FinishReason::parse(&reason),
                    });
                }
                if let Some(usage) = usage {
                    parsed.deltas.push(StreamDelta::Usage {
                        usage: Usage {
                            input_tokens: self.input_tokens,
                            output_tokens: usage.output_tokens.unwrap_or(0),
                        },
                    });
                }
            }
            WireEvent::MessageStop => parsed.end = true,
            WireEvent::Error { error } => {
                let message = if error.message.is_empty() {
                    error.kind
                } else {
                    error.message
                };
                return Err(ProviderError::Stream(message));
            }
            WireEvent::Ping | WireEvent::Unknown => {}
        }
        Ok(parsed)
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    MessageStart {
        message: WireMessageStart,
    },
    ContentBlockStart {
        index: usize,
        content_block: WireBlockStart,
    },
    ContentBlockDelta {
        index: usize,
        delta: WireBlockDelta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        #[serde(default)]
        delta: WireMessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: WireStreamError,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireMessageStart {
    #[serde(default)]
    id: Option<String>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlockStart {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        #[serde(default)]
        id: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        input: Option<serde_json::Value>,
    },
    /// Thinking, server tools and whatever comes next: not part of the answer.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlockDelta {
    TextDelta {
        #[serde(default)]
        text: String,
    },
    InputJsonDelta {
        #[serde(default)]
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireMessageDelta {
    stop_reason: Option<String>,
}

/// Null-tolerant: any count may be missing or `null`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct WireStreamError {
    #[serde(rename = "type")]
    kind: String,
    message: String,
}
