//! The OpenAI-compatible chat-completions provider: OpenAI, OpenRouter, Ollama, vLLM,
//! llama.cpp's server, and anything else that speaks `/chat/completions` with SSE streaming.

use super::{
    ChatRequest, DeltaStream, FinishReason, Provider, ProviderError, StreamDelta, ToolSpec, Usage,
};
use crate::config::{expand_env, ModelConfig};
use crate::message::Message;
use async_trait::async_trait;
use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

/// At most this much of a server's error body is kept in an error message.
const MAX_ERROR_BODY: usize = 2048;

/// A client for one OpenAI-compatible endpoint and model.
pub struct OpenAiProvider {
    http: reqwest::Client,
    url: String,
    model: String,
    /// The configured key, `${VAR}` unexpanded until a request needs it.
    api_key: String,
    idle_timeout: Duration,
}

impl OpenAiProvider {
    /// A provider for `config`'s endpoint and model.
    pub fn new(config: &ModelConfig) -> Result<Self, ProviderError> {
        let idle_timeout = Duration::from_secs(config.stream_idle_timeout_secs.max(1));
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(config.connect_timeout_secs.max(1)))
            .read_timeout(idle_timeout)
            .build()
            .map_err(|e| ProviderError::Config(format!("building the HTTP client: {e}")))?;
        Ok(Self {
            http,
            url: format!("{}/chat/completions", config.base_url.trim_end_matches('/')),
            model: config.model.clone(),
            api_key: config.api_keys.first().unwrap_or(&config.api_key).clone(),
            idle_timeout,
        })
    }
}

#[async_trait]
impl Provider for OpenAiProvider {
    fn model(&self) -> &str {
        &self.model
    }

    async fn stream(&self, request: &ChatRequest) -> Result<DeltaStream, ProviderError> {
        let key = expand_env(&self.api_key, "model.api_key")
            .map_err(|e| ProviderError::Config(e.to_string()))?;
        let body = serde_json::to_vec(&WireRequest::new(&self.model, request))
            .map_err(|e| ProviderError::Config(format!("encoding the request: {e}")))?;
        let mut http = self
            .http
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(body);
        if !key.is_empty() {
            http = http.bearer_auth(key);
        }
        let response = http.send().await.map_err(|e| self.transport_error(e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(http_error(response).await);
        }
        let events = response.bytes_stream().eventsource();
        Ok(Box::pin(sse_deltas(Box::pin(events), self.idle_timeout)))
    }
}

impl OpenAiProvider {
    fn transport_error(&self, e: reqwest::Error) -> ProviderError {
        if e.is_timeout() {
            ProviderError::IdleTimeout(self.idle_timeout)
        } else {
            ProviderError::Connect(format!("{}: {}", self.url, error_chain(&e)))
        }
    }
}

/// The error and its causes, which reqwest keeps apart ("error sending request" alone says
/// little).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

async fn http_error(response: reqwest::Response) -> ProviderError {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = response.text().await.unwrap_or_default();
    let message = serde_json::from_str::<WireErrorBody>(&body)
        .ok()
        .and_then(|b| b.error)
        .map(|e| e.message)
        .unwrap_or_else(|| truncate(body.trim(), MAX_ERROR_BODY));
    ProviderError::Http {
        status,
        message,
        retry_after,
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

type SseEvents = Pin<
    Box<
        dyn Stream<Item = Result<eventsource_stream::Event, EventStreamError<reqwest::Error>>>
            + Send,
    >,
>;

struct SseState {
    events: SseEvents,
    pending: VecDeque<StreamDelta>,
    saw_finish: bool,
    done: bool,
    idle_timeout: Duration,
}

/// Turns SSE events into deltas. The stream ends after `[DONE]`; a body that ends without it
/// and without a finish reason is reported as cut.
fn sse_deltas(
    events: SseEvents,
    idle_timeout: Duration,
) -> impl Stream<Item = Result<StreamDelta, ProviderError>> + Send {
    let state = SseState {
        events,
        pending: VecDeque::new(),
        saw_finish: false,
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
                    if !st.saw_finish {
                        let cut = ProviderError::StreamCut(
                            "the server closed the stream before [DONE]".into(),
                        );
                        return Some((Err(cut), st));
                    }
                }
                Some(Err(e)) => {
                    st.done = true;
                    return Some((Err(stream_error(e, st.idle_timeout)), st));
                }
                Some(Ok(event)) => {
                    let data = event.data.trim();
                    if data == "[DONE]" {
                        st.done = true;
                    } else if !data.is_empty() {
                        match parse_chunk(data) {
                            Ok(deltas) => {
                                st.saw_finish |= deltas
                                    .iter()
                                    .any(|d| matches!(d, StreamDelta::Finish { .. }));
                                st.pending.extend(deltas);
                            }
                            Err(e) => {
                                st.done = true;
                                return Some((Err(e), st));
                            }
                        }
                    }
                }
            }
        }
    })
}

fn stream_error(e: EventStreamError<reqwest::Error>, idle: Duration) -> ProviderError {
    match e {
        EventStreamError::Transport(t) if t.is_timeout() => ProviderError::IdleTimeout(idle),
        EventStreamError::Transport(t) => ProviderError::StreamCut(error_chain(&t)),
        EventStreamError::Utf8(u) => ProviderError::Malformed {
            line: String::from_utf8_lossy(u.as_bytes())
                .chars()
                .take(200)
                .collect(),
            reason: "not valid UTF-8".into(),
        },
        EventStreamError::Parser(p) => ProviderError::Malformed {
            line: truncate(&p.to_string(), 500),
            reason: "not a server-sent event".into(),
        },
    }
}

/// Parses one `data:` payload into deltas.
fn parse_chunk(data: &str) -> Result<Vec<StreamDelta>, ProviderError> {
    let chunk: WireChunk = serde_json::from_str(data).map_err(|e| ProviderError::Malformed {
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
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

impl<'a> WireRequest<'a> {
    fn new(model: &'a str, request: &'a ChatRequest) -> Self {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if !request.system.is_empty() {
            messages.push(WireMessage::System {
                content: &request.system,
            });
        }
        messages.extend(
            request
                .messages
                .iter()
                .map(|m| WireMessage::from(m.as_ref())),
        );
        Self {
            model,
            messages,
            tools: request.tools.iter().map(WireTool::from).collect(),
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
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
        tool_call_id: &'a str,
        content: &'a str,
    },
}

impl<'a> From<&'a Message> for WireMessage<'a> {
    fn from(m: &'a Message) -> Self {
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
                        id: c.id.as_str(),
                        kind: "function",
                        function: WireFunction {
                            name: &c.name,
                            arguments: &c.arguments,
                        },
                    })
                    .collect(),
            },
            Message::ToolResult {
                call_id, content, ..
            } => WireMessage::Tool {
                tool_call_id: call_id.as_str(),
                content,
            },
        }
    }
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    arguments: &'a str,
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
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<WireError>,
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
struct WireErrorBody {
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct WireError {
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
    }

    #[test]
    fn a_malformed_chunk_names_the_line() {
        match parse_chunk("{\"choices\": [oops") {
            Err(ProviderError::Malformed { line, .. }) => assert!(line.contains("oops")),
            other => panic!("{other:?}"),
        }
    }
}
