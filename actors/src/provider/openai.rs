//! The OpenAI-compatible chat-completions provider: OpenAI, OpenRouter, Ollama, vLLM,
//! llama.cpp's server, and anything else that speaks `/chat/completions` with SSE streaming.

use super::endpoint::{bearer, Endpoint};
use super::keys::ApiKeys;
use super::prefix::{Conversation, EncodedPrefix, Encoder};
use super::replay::{self, ReplayIds};
use super::sse::Decoded;
use super::{
    ChatRequest, DeltaStream, FinishReason, Provider, ProviderError, StreamDelta, ToolSpec, Usage,
};
use crate::config::{MaxTokensField, ModelConfig};
use crate::message::Message;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::sync::Arc;

/// A client for one OpenAI-compatible endpoint and model.
pub(crate) struct OpenAiProvider {
    endpoint: Endpoint,
    model: String,
    /// Every request's fields but the messages and tools, encoded once: a JSON object.
    settings: Vec<u8>,
    /// Marks the prefixes this provider encoded.
    encoder: Encoder,
}

impl OpenAiProvider {
    /// A provider for `config`'s endpoint and model, authenticating with `keys`.
    pub(crate) fn new(config: &ModelConfig, keys: Arc<ApiKeys>) -> Result<Self, ProviderError> {
        let settings =
            serde_json::to_vec(&WireSettings::new(config)).map_err(ProviderError::encoding)?;
        Ok(Self {
            endpoint: Endpoint::new(config, "chat/completions", keys)?,
            model: config.model.clone(),
            settings,
            encoder: Encoder::unique(),
        })
    }

    /// The body of a request for `request`: the messages and tools `encoded` holds from the
    /// run's last request are copied, and only what was added since is encoded.
    fn body(
        &self,
        request: &ChatRequest,
        encoded: &EncodedPrefix,
    ) -> Result<Vec<u8>, ProviderError> {
        let mut prefix = encoded.take(&Conversation {
            owner: self.encoder,
            system: &request.system,
            tools: &request.tools,
            messages: &request.messages,
        });
        if prefix.messages_json.is_empty() && !request.system.is_empty() {
            let system = WireMessage::System {
                content: &request.system,
            };
            serde_json::to_writer(&mut prefix.messages_json, &system)
                .map_err(ProviderError::encoding)?;
        }
        for message in &request.messages[prefix.encoded()..] {
            if !prefix.messages_json.is_empty() {
                prefix.messages_json.push(b',');
            }
            let wire = WireMessage::of(message, &mut prefix.ids);
            serde_json::to_writer(&mut prefix.messages_json, &wire)
                .map_err(ProviderError::encoding)?;
        }
        if prefix.tools_json.is_empty() && !request.tools.is_empty() {
            let tools: Vec<WireTool<'_>> = request.tools.iter().map(WireTool::from).collect();
            serde_json::to_writer(&mut prefix.tools_json, &tools)
                .map_err(ProviderError::encoding)?;
        }
        // The settings are an object: its closing brace makes room for the rest.
        let open = &self.settings[..self.settings.len() - 1];
        let mut body = Vec::with_capacity(
            open.len() + prefix.messages_json.len() + prefix.tools_json.len() + 32,
        );
        body.extend_from_slice(open);
        body.extend_from_slice(b",\"messages\":[");
        body.extend_from_slice(&prefix.messages_json);
        body.push(b']');
        if !prefix.tools_json.is_empty() {
            body.extend_from_slice(b",\"tools\":");
            body.extend_from_slice(&prefix.tools_json);
        }
        body.push(b'}');
        encoded.keep(prefix, &request.messages);
        Ok(body)
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
        self.stream_continuing(request, &EncodedPrefix::default())
            .await
    }

    async fn stream_continuing(
        &self,
        request: &ChatRequest,
        encoded: &EncodedPrefix,
    ) -> Result<DeltaStream, ProviderError> {
        let body = self.body(request, encoded)?;
        (self.endpoint)
            .stream(body, |r| r, bearer, decode_event)
            .await
    }

    fn key_label(&self) -> String {
        self.endpoint.key_label()
    }

    fn runs_locally(&self) -> bool {
        self.endpoint.is_local()
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
    let mut chunk: WireChunk = super::sse::payload(data)?;
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

/// Every request's fields but the messages and tools.
#[derive(Serialize)]
struct WireSettings<'a> {
    model: &'a str,
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

impl<'a> WireSettings<'a> {
    /// The output limit (none when 0) goes in the field `config` names.
    fn new(config: &'a ModelConfig) -> Self {
        let limit = config.max_output_tokens;
        let field = config.max_tokens_field;
        Self {
            model: &config.model,
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            max_tokens: (limit > 0 && field == MaxTokensField::MaxTokens).then_some(limit),
            max_completion_tokens: (limit > 0 && field == MaxTokensField::MaxCompletionTokens)
                .then_some(limit),
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
        content: Cow<'a, str>,
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
    fn of(m: &'a Message, ids: &mut ReplayIds) -> Self {
        match m {
            Message::User { content } => WireMessage::User {
                content: Cow::Borrowed(content),
            },
            Message::System { content } => WireMessage::User {
                content: Cow::Owned(replay::system_note(content)),
            },
            Message::Assistant {
                content,
                tool_calls,
                ..
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
    use crate::message::ToolCall;
    use ryvos_protocol::ids::CallId;

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

    fn call(id: &str) -> Arc<Message> {
        Arc::new(Message::assistant(
            "",
            vec![ToolCall {
                id: CallId::new(id),
                name: "read".into(),
                arguments: r#"{"path":"a \"b\".txt"}"#.into(),
            }],
        ))
    }

    fn result(id: &str) -> Arc<Message> {
        Arc::new(Message::ToolResult {
            call_id: CallId::new(id),
            name: "read".into(),
            content: "line\nwith \u{1} and é".into(),
            is_error: false,
        })
    }

    /// A conversation whose replayed ids need the whole history: an id the server must not
    /// get ("bad id!"), and the same id used twice.
    fn conversation() -> Vec<Arc<Message>> {
        let mut messages = vec![Arc::new(Message::user("look"))];
        for id in ["bad id!", "c1", "c1", "bad id!"] {
            messages.push(call(id));
            messages.push(result(id));
        }
        messages.push(Arc::new(Message::System {
            content: "a hint".into(),
        }));
        messages.push(Arc::new(Message::Assistant {
            content: "done".into(),
            tool_calls: Vec::new(),
            reasoning: Vec::new(),
        }));
        messages
    }

    fn provider() -> OpenAiProvider {
        let keys = Arc::new(ApiKeys::new("", &[], "api_key"));
        OpenAiProvider::new(&ModelConfig::default(), keys).unwrap()
    }

    fn tools() -> Arc<Vec<ToolSpec>> {
        Arc::new(vec![ToolSpec {
            name: "read".into(),
            description: "reads".into(),
            parameters: serde_json::json!({"type": "object"}),
        }])
    }

    /// The body `provider` sends for `messages`, continuing from `encoded`.
    fn body(
        provider: &OpenAiProvider,
        (system, tools): (&Arc<str>, &Arc<Vec<ToolSpec>>),
        messages: &Arc<Vec<Arc<Message>>>,
        encoded: &EncodedPrefix,
    ) -> String {
        let request = ChatRequest {
            system: system.clone(),
            messages: messages.clone(),
            tools: tools.clone(),
        };
        String::from_utf8(provider.body(&request, encoded).unwrap()).unwrap()
    }

    #[test]
    fn a_continued_request_is_encoded_as_the_whole_one_would_be() {
        let provider = provider();
        for system in ["be brief", ""] {
            for tools in [Arc::new(Vec::new()), tools()] {
                let system: Arc<str> = system.into();
                let encoded = EncodedPrefix::default();
                // Each request continues the last one's messages, as a run's turns do: the
                // same system prompt, tools and messages, shared.
                let mut messages = Arc::new(Vec::new());
                for message in conversation() {
                    Arc::make_mut(&mut messages).push(message);
                    let continued = body(&provider, (&system, &tools), &messages, &encoded);
                    let whole = body(&provider, (&system, &tools), &messages, &Default::default());
                    assert_eq!(continued, whole);
                }
                let sent: serde_json::Value =
                    serde_json::from_str(&body(&provider, (&system, &tools), &messages, &encoded))
                        .unwrap();
                let ids: Vec<_> = sent["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|m| m.get("tool_call_id"))
                    .collect();
                assert_eq!(ids, ["bad_id_", "c1", "c1_2", "bad_id__2"]);
            }
        }
    }

    #[test]
    fn a_conversation_that_changed_is_encoded_whole_again() {
        let (provider, other) = (provider(), provider());
        let (system, no_tools): (Arc<str>, _) = ("be brief".into(), Arc::new(Vec::new()));
        let whole = |messages: &Arc<Vec<Arc<Message>>>, tools: &Arc<Vec<ToolSpec>>| {
            body(&provider, (&system, tools), messages, &Default::default())
        };
        let messages = Arc::new(conversation());
        let encoded = EncodedPrefix::default();
        let next = |messages: &Arc<Vec<Arc<Message>>>, tools: &Arc<Vec<ToolSpec>>| {
            body(&provider, (&system, tools), messages, &encoded)
        };
        next(&messages, &no_tools);
        // Pruned: the first exchanges are gone.
        let pruned = Arc::new(messages[5..].to_vec());
        assert_eq!(next(&pruned, &no_tools), whole(&pruned, &no_tools));
        // Rewritten: the same length as the last request, another message in the middle.
        next(&messages, &no_tools);
        let mut rewritten = (*messages).clone();
        rewritten[2] = result("c9");
        let rewritten = Arc::new(rewritten);
        assert_eq!(next(&rewritten, &no_tools), whole(&rewritten, &no_tools));
        // Tools joined (an MCP server came up).
        let tools = tools();
        assert_eq!(next(&rewritten, &tools), whole(&rewritten, &tools));
        // Another provider (a fallback model) encodes for itself.
        let by_other = body(&other, (&system, &tools), &rewritten, &encoded);
        assert_eq!(by_other, whole(&rewritten, &tools));
    }

    #[test]
    fn a_malformed_chunk_names_the_line() {
        match parse_chunk("{\"choices\": [oops") {
            Err(ProviderError::Malformed { line, .. }) => assert!(line.contains("oops")),
            other => panic!("{other:?}"),
        }
    }
}
