//! The request in Anthropic's shape: the conversation mapped onto two alternating roles and
//! content blocks (`text`, `tool_use`, `tool_result`), with the system prompt and tools apart.

use crate::message::Message;
use crate::provider::replay::{self, ReplayIds};
use crate::provider::{ChatRequest, ToolSpec};
use serde::Serialize;
use std::borrow::Cow;
use std::sync::Arc;

#[derive(Serialize)]
pub(super) struct WireRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "str::is_empty")]
    system: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tools: Vec<WireTool<'a>>,
    stream: bool,
}

impl<'a> WireRequest<'a> {
    pub(super) fn new(model: &'a str, max_tokens: u32, request: &'a ChatRequest) -> Self {
        Self {
            model,
            max_tokens,
            system: &request.system,
            messages: wire_messages(&request.messages),
            tools: request.tools.iter().map(WireTool::from).collect(),
            stream: true,
        }
    }
}

#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(super) enum WireRole {
    User,
    Assistant,
}

#[derive(Serialize, Debug)]
pub(super) struct WireMessage<'a> {
    role: WireRole,
    content: Vec<WireBlock<'a>>,
}

impl<'a> WireMessage<'a> {
    /// Adds a block. In a user message the tool results come first, in order, then the rest.
    fn push(&mut self, block: WireBlock<'a>) {
        if matches!(block, WireBlock::ToolResult { .. }) {
            let after_results = self
                .content
                .iter()
                .take_while(|b| matches!(b, WireBlock::ToolResult { .. }))
                .count();
            self.content.insert(after_results, block);
        } else {
            self.content.push(block);
        }
    }
}

#[derive(Serialize, Debug)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum WireBlock<'a> {
    Text {
        text: Cow<'a, str>,
    },
    ToolUse {
        id: Cow<'a, str>,
        name: Cow<'a, str>,
        input: serde_json::Value,
    },
    ToolResult {
        tool_use_id: Cow<'a, str>,
        content: &'a str,
        #[serde(skip_serializing_if = "is_false")]
        is_error: bool,
    },
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl<'a> WireBlock<'a> {
    fn text(text: impl Into<Cow<'a, str>>) -> Self {
        WireBlock::Text { text: text.into() }
    }
}

/// The conversation in Anthropic's shape: user and assistant messages strictly alternating,
/// starting with a user message. Tool results and runtime notes travel in user messages;
/// consecutive blocks of one role share a message, so every result answering an assistant
/// message is in the single user message after it.
pub(super) fn wire_messages(messages: &[Arc<Message>]) -> Vec<WireMessage<'_>> {
    let mut out: Vec<WireMessage<'_>> = Vec::with_capacity(messages.len() + 1);
    let mut ids = ReplayIds::default();
    for message in messages {
        let (role, blocks) = blocks_of(message, &mut ids);
        if out.last().is_none_or(|last| last.role != role) {
            out.push(WireMessage {
                role,
                content: Vec::new(),
            });
        }
        if let Some(last) = out.last_mut() {
            for block in blocks {
                last.push(block);
            }
        }
    }
    if out.first().is_some_and(|m| m.role == WireRole::Assistant) {
        out.insert(
            0,
            WireMessage {
                role: WireRole::User,
                content: vec![WireBlock::text("(conversation continues)")],
            },
        );
    }
    out
}

/// The role one message is sent as and its blocks; calls and results as every server accepts
/// them (see [`replay`]).
fn blocks_of<'a>(message: &'a Message, ids: &mut ReplayIds) -> (WireRole, Vec<WireBlock<'a>>) {
    match message {
        Message::User { content } if content.trim().is_empty() => {
            (WireRole::User, vec![WireBlock::text("(empty message)")])
        }
        Message::User { content } => (WireRole::User, vec![WireBlock::text(content.as_str())]),
        Message::System { content } => (
            WireRole::User,
            vec![WireBlock::text(replay::system_note(content))],
        ),
        Message::Assistant {
            content,
            tool_calls,
            ..
        } => {
            let mut blocks = Vec::with_capacity(tool_calls.len() + 1);
            // Anthropic refuses a text block of whitespace alone.
            if !content.trim().is_empty() {
                blocks.push(WireBlock::text(content.as_str()));
            }
            blocks.extend(tool_calls.iter().map(|call| WireBlock::ToolUse {
                id: ids.call(call.id.as_str()),
                name: replay::tool_name(&call.name),
                input: replay::arguments_value(&call.arguments),
            }));
            if blocks.is_empty() {
                blocks.push(WireBlock::text("(no answer)"));
            }
            (WireRole::Assistant, blocks)
        }
        Message::ToolResult {
            call_id,
            content,
            is_error,
            ..
        } => (
            WireRole::User,
            vec![WireBlock::ToolResult {
                tool_use_id: ids.result(call_id.as_str()),
                content,
                is_error: *is_error,
            }],
        ),
    }
}

#[derive(Serialize)]
pub(super) struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a serde_json::Value,
}

impl<'a> From<&'a ToolSpec> for WireTool<'a> {
    fn from(spec: &'a ToolSpec) -> Self {
        Self {
            name: &spec.name,
            description: &spec.description,
            input_schema: &spec.parameters,
        }
    }
}
