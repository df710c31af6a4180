//! The conversation as the engine stores it and sends it to providers.
//!
//! Provider-neutral: each provider maps these to its wire format. A tool result is its own
//! message, paired with its call by [`CallId`], which maps directly onto OpenAI's `tool` role and
//! is grouped into one user turn for Anthropic.

use crate::ids::CallId;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// What the user (or a host application) said.
    User { content: String },
    /// The model's turn: text, tool calls, or both.
    Assistant {
        #[serde(default, skip_serializing_if = "String::is_empty")]
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// The reasoning that led to this turn, as a provider that keeps reasoning between
        /// turns gave it (OpenAI's Responses API): passed back to it with the turn, opaque to
        /// Ryvos; other providers are not sent it.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        reasoning: Vec<Reasoning>,
    },
    /// The result of one tool call, fed back to the model.
    ToolResult {
        call_id: CallId,
        name: String,
        content: String,
        #[serde(default)]
        is_error: bool,
    },
    /// A note from the runtime itself (a hint, a summary), sent to the model as a system message.
    System { content: String },
}

impl Message {
    /// An assistant turn of `content` and `tool_calls`, with no reasoning kept.
    pub fn assistant(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Message::Assistant {
            content: content.into(),
            tool_calls,
            reasoning: Vec::new(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message::User {
            content: content.into(),
        }
    }

    /// The tool calls of an assistant message; empty for every other kind.
    pub fn tool_calls(&self) -> &[ToolCall] {
        match self {
            Message::Assistant { tool_calls, .. } => tool_calls,
            _ => &[],
        }
    }

    /// All the text the message carries, for token counting.
    pub fn text_for_counting(&self) -> impl Iterator<Item = &str> {
        let (main, calls): (&str, &[ToolCall]) = match self {
            Message::User { content } | Message::System { content } => (content, &[]),
            Message::Assistant {
                content,
                tool_calls,
                ..
            } => (content, tool_calls),
            Message::ToolResult { content, .. } => (content, &[]),
        };
        std::iter::once(main).chain(
            calls
                .iter()
                .flat_map(|c| [c.name.as_str(), c.arguments.as_str()]),
        )
    }
}

/// One reasoning item of a model's turn, kept to be passed back with it. With nothing stored
/// on the provider's side, `encrypted_content` is the reasoning itself, readable only by the
/// provider; `summary` is what the provider chose to show of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Reasoning {
    /// The provider's id for the item.
    pub id: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub summary: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_content: Option<String>,
}

/// A tool call as the model made it.
///
/// `arguments` is kept as the raw text the model produced, not parsed JSON: a truncated or
/// malformed argument string must be stored and sent back exactly, and reported to the model as a
/// `validation_error` rather than lost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCall {
    pub id: CallId,
    pub name: String,
    pub arguments: String,
}
