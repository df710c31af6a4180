//! The OpenAI-compatible chat-completions provider: OpenAI, OpenRouter, Ollama, vLLM,
//! llama.cpp's server, and anything else that speaks `/chat/completions` with SSE streaming.

use super::http::{self, truncate};
use super::keys::ApiKeys;
use super::replay::{self, ReplayIds};
use super::sse::{self, Decoded};
use super::{
    ChatRequest, DeltaStream, FinishReason, Provider, ProviderError, StreamDelta, ToolSpec, Usage,
};
use crate::config::{MaxTokensField, ModelConfig};
use crate::message::Message;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

/// A client for one OpenAI-compatible endpoint and model.
pub(crate) struct OpenAiProvider {
    http: reqwest::Client,
    url: String,
    model: String,
    keys: Arc<ApiKeys>,
    idle_timeout: Duration,
    /// The output limit, and the field that carries it.
    limit: OutputLimit,
    /// The endpoint is on loopback.
    local: bool,
}

/// The output limit of every request; none when 0.
#[derive(Clone, Copy)]
struct OutputLimit {
    tokens: u32,
    field: MaxTokensField,
}

impl OpenAiProvider {
    /// A provider for `config`'s endpoint and model, authenticating with `keys`.
    pub(crate) fn new(config: &ModelConfig, keys: Arc<ApiKeys>) -> Result<Self, ProviderError> {
        let (http, idle_timeout) = http::client(config)?;
        Ok(Self {
            http,
            url: format!("{}/chat/completions", config.base_url.trim_end_matches('/')),
            model: config.model.clone(),
            keys,
            idle_timeout,
            limit: OutputLimit {
                tokens: config.max_output_tokens,
                field: config.max_tokens_field,
            },
            local: http::is_loopback(&config.base_url),
        })
    }
}

#[async_trait]
impl Provider for OpenAiProvider {
    fn provider_name(&self) -> &str {
        "openai"
    }

    fn model(&self) -> &str {
        &self.model
    }

    async fn stream(&self, request: &ChatRequest) -> Result<DeltaStream, ProviderError> {
        let body = serde_json::to_vec(&WireRequest::new(&self.model, request, self.limit))
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
        Ok(sse::deltas(response, self.idle_timeout, decode_event))
    }

    fn key_label(&self) -> String {
        self.keys.label()
    }

    fn runs_locally(&self) -> bool {
        self.local
    }
}

/// Decodes one event's data: a chunk of the answer, or the `[DONE]` marker.
pub(crate) fn decode_event(data: &str) -> Result<Decoded, ProviderError> {
    if data == "[DONE]" {
        return Ok(Decoded {
            deltas: Vec::new(),
            end: true,
        });
    }
    parse_chunk(data).map(|deltas| Decoded { deltas, end: false })
}

/// Parses one `data:` payload into deltas.
fn parse_chunk(data: &str) -> Result<Vec<StreamDelta>, ProviderError> {
    let mut chunk: WireChunk =
        serde_json::from_str(data).map_err(|e| ProviderError::Malformed {
            line: truncate(data, 500),
            reason: e.to_string(),
        })?;
    if let Some(error) = chunk.error {
        return Err(ProviderError::Stream(error.message));
    }
    let mut deltas = Vec::new();
    for choice in chunk.choices {
        if let Some(delta) = choice.delta {
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                deltas.push(StreamDelta::Text { text });
            }
            for (position, call) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                let function = call.function.unwrap_or_default();
                deltas.push(StreamDelta::ToolCall {
                    index: call.index.unwrap_or(position),
                    id: call.id.filter(|i| !i.is_empty()),
                    name: function.name.filter(|n| !n.is_empty()),
                    arguments: function.arguments.filter(|a| !a.is_empty()),
                });
            }
        }
        if let Some(reason) = choice.finish_reason {
            // Every chunk carries the answer's id; it is passed on once, with the end.
            if let Some(id) = chunk.id.take().filter(|i| !i.is_empty()) {
                deltas.push(StreamDelta::ResponseId { id });
            }
            deltas.push(StreamDelta::Finish {
                reason: FinishReason::parse(&reason),
            });
        }
    }
    if let Some(u) = chunk.usage {
        deltas.push(StreamDelta::Usage {
            usage: Usage {
                input_tokens: u.prompt_tokens,
                output_tokens: u.completion_tokens,
            },
        });
    }
    Ok(deltas)
}

// --- Wire format -------------------------------------------------------------------------

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tools: Vec<WireTool<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

impl<'a> WireRequest<'a> {
    fn new(model: &'a str, request: &'a ChatRequest, limit: OutputLimit) -> Self {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if !request.system.is_empty() {
            messages.push(WireMessage::System {
                content: &request.system,
            });
        }
        let mut ids = ReplayIds::default();
        messages.extend(
            request
                .messages
                .iter()
                .map(|m| WireMessage::of(m.as_ref(), &mut ids)),
        );
        Self {
            model,
            messages,
            tools: request.tools.iter().map(WireTool::from).collect(),
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            max_tokens: (limit.tokens > 0 && limit.field == MaxTokensField::MaxTokens)
                .then_some(limit.tokens),
            max_completion_tokens: (limit.tokens > 0
                && limit.field == MaxTokensField::MaxCompletionTokens)
                .then_some(limit.tokens),
        }
    }
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: Cow<'a, str>,
        content: &'a str,
    },
}

impl<'a> WireMessage<'a> {
    /// `m` as the wire carries it: calls and results as every server accepts them (see
    /// [`replay`]).
    fn of(m: &'a Message, ids: &mut ReplayIds<'a>) -> Self {
        match m {
            Message::User { content } => WireMessage::User { content },
            Message::System { content } => WireMessage::System { content },
            Message::Assistant {
                content,
                tool_calls,
            } => WireMessage::Assistant {
                content: (!content.is_empty()).then_some(content.as_str()),
                tool_calls: tool_calls
                    .iter()
                    .map(|c| WireToolCall {
                        id: ids.call(c.id.as_str()),
                        kind: "function",
                        function: WireFunction {
                            name: replay::tool_name(&c.name),
                            arguments: replay::arguments(&c.arguments),
                        },
                    })
                    .collect(),
            },
            Message::ToolResult {
                call_id, content, ..
            } => WireMessage::Tool {
                tool_call_id: ids.result(call_id.as_str()),
                content,
            },
        }
    }
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: Cow<'a, str>,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: Cow<'a, str>,
    arguments: Cow<'a, str>,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: &'a ToolSpec,
}

impl<'a> From<&'a ToolSpec> for WireTool<'a> {
    fn from(spec: &'a ToolSpec) -> Self {
        Self {
            kind: "function",
            function: spec,
        }
    }
}

#[derive(Deserialize)]
struct WireChunk {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<WireStreamError>,
}

#[derive(Deserialize)]
struct WireChoice {
    #[serde(default)]
    delta: Option<WireDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCallDelta>>,
}

#[derive(Deserialize)]
struct WireToolCallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunctionDelta>,
}

#[derive(Deserialize, Default)]
struct WireFunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

#[derive(Deserialize)]
struct WireStreamError {
    #[serde(default)]
    message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_with_missing_optional_fields_parse() {
        let d = parse_chunk(r#"{"choices":[{"delta":{"content":"Hi"}}]}"#).unwrap();
        assert_eq!(d, vec![StreamDelta::Text { text: "Hi".into() }]);
        let d = parse_chunk(r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#)
            .unwrap();
        assert_eq!(
            d,
            vec![StreamDelta::Usage {
                usage: Usage {
                    input_tokens: 3,
                    output_tokens: 2
                }
            }]
        );
        let d = parse_chunk(
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"c","function":{"name":"read","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
        )
        .unwrap();
        assert_eq!(d.len(), 2);
        // The answer's id is passed on once, with its end.
        let d = parse_chunk(r#"{"id":"chatcmpl-1","choices":[{"delta":{"content":"a"}}]}"#);
        assert_eq!(d.unwrap().len(), 1);
        let d = parse_chunk(r#"{"id":"chatcmpl-1","choices":[{"finish_reason":"stop"}]}"#);
        assert_eq!(
            d.unwrap()[0],
            StreamDelta::ResponseId {
                id: "chatcmpl-1".into()
            }
        );
    }

    #[test]
    fn a_malformed_chunk_names_the_line() {
        match parse_chunk("{\"choices\": [oops") {
            Err(ProviderError::Malformed { line, .. }) => assert!(line.contains("oops")),
            other => panic!("{other:?}"),
        }
    }
}
