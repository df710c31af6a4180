//! The request in the Responses API's shape: the system prompt as `instructions`, the
//! conversation as a list of input items (messages, `function_call`s and their
//! `function_call_output`s by `call_id`, and the `reasoning` items a turn came with, passed
//! back whole since nothing is stored on the server's side).

use crate::message::{Message, Reasoning};
use crate::provider::replay::{self, ReplayIds};
use crate::provider::{ChatRequest, ToolSpec};
use serde::Serialize;
use std::borrow::Cow;
use std::sync::Arc;

/// What is asked to come back with each answer: the reasoning, encrypted, to pass back.
const INCLUDE: [&str; 1] = ["reasoning.encrypted_content"];

#[derive(Serialize)]
pub(super) struct WireRequest<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    instructions: &'a str,
    input: Vec<WireItem<'a>>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tools: Vec<WireTool<'a>>,
    stream: bool,
    /// Nothing is kept on the server: the conversation, reasoning included, is Ryvos's own.
    store: bool,
    include: [&'static str; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
}

impl<'a> WireRequest<'a> {
    /// `request` for `model`; answers at most `max_output_tokens` long (none when 0).
    pub(super) fn new(model: &'a str, max_output_tokens: u32, request: &'a ChatRequest) -> Self {
        Self {
            model,
            instructions: &request.system,
            input: input_items(&request.messages),
            tools: request.tools.iter().map(WireTool::from).collect(),
            stream: true,
            store: false,
            include: INCLUDE,
            max_output_tokens: (max_output_tokens > 0).then_some(max_output_tokens),
        }
    }
}

#[derive(Serialize, Debug)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum WireItem<'a> {
    Message {
        role: &'static str,
        content: Cow<'a, str>,
    },
    Reasoning {
        id: &'a str,
        summary: Vec<WireSummary<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        encrypted_content: Option<&'a str>,
    },
    FunctionCall {
        call_id: Cow<'a, str>,
        name: Cow<'a, str>,
        arguments: Cow<'a, str>,
    },
    FunctionCallOutput {
        call_id: Cow<'a, str>,
        output: &'a str,
    },
}

#[derive(Serialize, Debug)]
pub(super) struct WireSummary<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

/// The conversation as input items; calls and results as every server accepts them (see
/// [`replay`]).
pub(super) fn input_items(messages: &[Arc<Message>]) -> Vec<WireItem<'_>> {
    let mut items = Vec::with_capacity(messages.len() + 1);
    let mut ids = ReplayIds::default();
    for message in messages {
        match &**message {
            Message::User { content } => items.push(WireItem::Message {
                role: "user",
                content: Cow::Borrowed(content),
            }),
            Message::System { content } => items.push(WireItem::Message {
                role: "user",
                content: Cow::Owned(replay::system_note(content)),
            }),
            Message::Assistant {
                content,
                tool_calls,
                reasoning,
            } => {
                // A reasoning item is refused without the output that followed it.
                if !content.is_empty() || !tool_calls.is_empty() {
                    items.extend(reasoning.iter().map(reasoning_item));
                }
                if !content.is_empty() {
                    items.push(WireItem::Message {
                        role: "assistant",
                        content: Cow::Borrowed(content),
                    });
                }
                items.extend(tool_calls.iter().map(|call| WireItem::FunctionCall {
                    call_id: ids.call(call.id.as_str()),
                    name: replay::tool_name(&call.name),
                    arguments: replay::arguments(&call.arguments),
                }));
            }
            Message::ToolResult {
                call_id, content, ..
            } => items.push(WireItem::FunctionCallOutput {
                call_id: ids.result(call_id.as_str()),
                output: content,
            }),
        }
    }
    items
}

fn reasoning_item(reasoning: &Reasoning) -> WireItem<'_> {
    WireItem::Reasoning {
        id: &reasoning.id,
        summary: reasoning
            .summary
            .iter()
            .map(|text| WireSummary {
                kind: "summary_text",
                text,
            })
            .collect(),
        encrypted_content: reasoning.encrypted_content.as_deref(),
    }
}

/// A function tool. Not `strict`: the tools' schemas are not written for strict mode (every
/// property required, no others allowed), which the Responses API assumes by default.
#[derive(Serialize)]
pub(super) struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
    strict: bool,
}

impl<'a> From<&'a ToolSpec> for WireTool<'a> {
    fn from(spec: &'a ToolSpec) -> Self {
        Self {
            kind: "function",
            name: &spec.name,
            description: &spec.description,
            parameters: &spec.parameters,
            strict: false,
        }
    }
}
