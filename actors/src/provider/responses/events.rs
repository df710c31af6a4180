//! The Responses API's typed stream events (`response.output_text.delta`,
//! `response.function_call_arguments.delta`, `response.output_item.added`/`done`,
//! `response.completed`/`incomplete`/`failed`, `error`) turned into [`StreamDelta`]s. The
//! stream has no `[DONE]`: a terminal `response.*` event ends it.
//!
//! Read as servers send them, not only as OpenAI does: an item is known by its `output_index`
//! or, where a server leaves that out (llama.cpp), by its id (`item_id` on a delta); and a
//! response whose output reached `max_output_tokens` was cut, whatever its last event says
//! (llama.cpp ends it `response.completed`).

use crate::message::Reasoning;
use crate::provider::sse::Decoded;
use crate::provider::{FinishReason, ProviderError, StreamDelta, Usage};
use serde::Deserialize;
use std::collections::{HashMap, HashSet};

/// Reads the events of one response, keeping what later events need: which output items are
/// function calls, and which of them (and of the messages) streamed their content, so that an
/// item's `done` supplies only what was not streamed.
#[derive(Default)]
pub(super) struct EventParser {
    /// Output indexes of the function calls announced.
    calls: HashSet<usize>,
    /// Output indexes of the calls whose arguments streamed.
    calls_streamed: HashSet<usize>,
    /// Output indexes of the messages whose text streamed.
    texts_streamed: HashSet<usize>,
    /// The index given to each item known only by its id.
    by_id: HashMap<String, usize>,
    /// The output limit the request asked for: output that reaches it was cut.
    max_output_tokens: Option<u64>,
}

impl EventParser {
    /// A parser for a response asked for at most `max_output_tokens`.
    pub(super) fn limited_to(max_output_tokens: u32) -> Self {
        Self {
            max_output_tokens: Some(u64::from(max_output_tokens)).filter(|n| *n > 0),
            ..Self::default()
        }
    }

    /// The index of an item: its `output_index`, else the one given to its id (a new one
    /// for an id not seen yet, after every index in use).
    fn index(&mut self, output_index: Option<usize>, id: Option<&str>) -> usize {
        if let Some(index) = output_index {
            return index;
        }
        let Some(id) = id.filter(|i| !i.is_empty()) else {
            return 0;
        };
        if let Some(index) = self.by_id.get(id) {
            return *index;
        }
        let next = (self.calls.iter().chain(&self.texts_streamed))
            .chain(self.by_id.values())
            .max()
            .map_or(0, |i| i + 1);
        self.by_id.insert(id.to_owned(), next);
        next
    }

    /// Parses one `data:` payload.
    pub(super) fn parse(&mut self, data: &str) -> Result<Decoded, ProviderError> {
        let event: WireEvent = crate::provider::sse::payload(data)?;
        let mut parsed = Decoded::default();
        match event {
            WireEvent::Created { response } => {
                if let Some(id) = response.id.filter(|i| !i.is_empty()) {
                    parsed.deltas.push(StreamDelta::ResponseId { id });
                }
            }
            WireEvent::ItemAdded { output_index, item } => {
                let index = self.index(output_index, item.id());
                if let WireItem::FunctionCall { call_id, name, .. } = item {
                    parsed.deltas.push(self.announce(index, call_id, name));
                }
            }
            WireEvent::TextDelta {
                output_index,
                item_id,
                delta,
            } => {
                let index = self.index(output_index, item_id.as_deref());
                self.texts_streamed.insert(index);
                if !delta.is_empty() {
                    parsed.deltas.push(StreamDelta::Text { text: delta });
                }
            }
            WireEvent::ArgumentsDelta {
                output_index,
                item_id,
                delta,
            } => {
                let index = self.index(output_index, item_id.as_deref());
                if !delta.is_empty() && self.calls.contains(&index) {
                    self.calls_streamed.insert(index);
                    parsed.deltas.push(arguments(index, delta));
                }
            }
            WireEvent::ItemDone { output_index, item } => {
                let index = self.index(output_index, item.id());
                self.item_done(index, item, &mut parsed.deltas)
            }
            WireEvent::Completed { response } => {
                let reason = if self.reached_the_limit(&response) {
                    FinishReason::Length
                } else if self.calls.is_empty() {
                    FinishReason::Stop
                } else {
                    FinishReason::ToolCalls
                };
                end(response, reason, &mut parsed);
            }
            WireEvent::Incomplete { response } => {
                let why = response
                    .incomplete_details
                    .as_ref()
                    .and_then(|d| d.reason.clone())
                    .unwrap_or_else(|| "incomplete".into());
                let reason = match why.as_str() {
                    "max_output_tokens" => FinishReason::Length,
                    "content_filter" => FinishReason::ContentFilter,
                    _ => FinishReason::Other(why),
                };
                end(response, reason, &mut parsed);
            }
            WireEvent::Failed { response } => {
                return Err(response.error.unwrap_or_default().into())
            }
            WireEvent::Error(error) => return Err(error.into()),
            WireEvent::Other => {}
        }
        Ok(parsed)
    }

    /// Whether `response`, said complete, was cut at the output limit all the same: it says
    /// so in its details, or its output reached the limit asked for.
    fn reached_the_limit(&self, response: &WireResponse) -> bool {
        let said = response
            .incomplete_details
            .as_ref()
            .and_then(|d| d.reason.as_deref())
            == Some("max_output_tokens");
        let output = response.usage.as_ref().map(|u| u.output_tokens);
        said || matches!((output, self.max_output_tokens), (Some(n), Some(max)) if n >= max)
    }

    /// The call at `index` begins: its id and name.
    fn announce(&mut self, index: usize, call_id: String, name: String) -> StreamDelta {
        self.calls.insert(index);
        StreamDelta::ToolCall {
            index,
            id: Some(call_id).filter(|i| !i.is_empty()),
            name: Some(name).filter(|n| !n.is_empty()),
            arguments: None,
        }
    }

    /// A whole output item: a reasoning item is kept; a call or message gives what did not
    /// stream (a server may send an item whole at its end).
    fn item_done(&mut self, index: usize, item: WireItem, deltas: &mut Vec<StreamDelta>) {
        match item {
            WireItem::Reasoning {
                id,
                summary,
                encrypted_content,
            } => deltas.push(StreamDelta::Reasoning {
                item: Reasoning {
                    id,
                    summary: summary.into_iter().map(|s| s.text).collect(),
                    encrypted_content,
                },
            }),
            WireItem::FunctionCall {
                call_id,
                name,
                arguments: whole,
                ..
            } => {
                if !self.calls.contains(&index) {
                    deltas.push(self.announce(index, call_id, name));
                }
                if !self.calls_streamed.contains(&index) {
                    let whole = whole.filter(|a| !a.is_empty());
                    deltas.push(arguments(index, whole.unwrap_or_else(|| "{}".into())));
                }
            }
            WireItem::Message { content, .. } if !self.texts_streamed.contains(&index) => {
                let text: String = content.into_iter().filter_map(WireContent::text).collect();
                if !text.is_empty() {
                    deltas.push(StreamDelta::Text { text });
                }
            }
            WireItem::Message { .. } | WireItem::Other => {}
        }
    }
}

fn arguments(index: usize, text: String) -> StreamDelta {
    StreamDelta::ToolCall {
        index,
        id: None,
        name: None,
        arguments: Some(text),
    }
}

/// The response's end: its usage and why it stopped.
fn end(response: WireResponse, reason: FinishReason, parsed: &mut Decoded) {
    if let Some(usage) = response.usage {
        parsed.deltas.push(StreamDelta::Usage {
            usage: Usage {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
            },
        });
    }
    parsed.deltas.push(StreamDelta::Finish { reason });
    parsed.end = true;
}

#[derive(Deserialize)]
#[serde(tag = "type")]
enum WireEvent {
    #[serde(rename = "response.created")]
    Created { response: WireResponse },
    #[serde(rename = "response.output_item.added")]
    ItemAdded {
        #[serde(default)]
        output_index: Option<usize>,
        item: WireItem,
    },
    #[serde(rename = "response.output_text.delta")]
    TextDelta {
        #[serde(default)]
        output_index: Option<usize>,
        #[serde(default)]
        item_id: Option<String>,
        delta: String,
    },
    #[serde(rename = "response.function_call_arguments.delta")]
    ArgumentsDelta {
        #[serde(default)]
        output_index: Option<usize>,
        #[serde(default)]
        item_id: Option<String>,
        delta: String,
    },
    #[serde(rename = "response.output_item.done")]
    ItemDone {
        #[serde(default)]
        output_index: Option<usize>,
        item: WireItem,
    },
    #[serde(rename = "response.completed")]
    Completed { response: WireResponse },
    #[serde(rename = "response.incomplete")]
    Incomplete { response: WireResponse },
    #[serde(rename = "response.failed")]
    Failed { response: WireResponse },
    #[serde(rename = "error")]
    Error(WireError),
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireItem {
    Message {
        #[serde(default)]
        id: Option<String>,
        #[serde(default)]
        content: Vec<WireContent>,
    },
    FunctionCall {
        #[serde(default)]
        id: Option<String>,
        #[serde(default)]
        call_id: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        arguments: Option<String>,
    },
    Reasoning {
        id: String,
        #[serde(default)]
        summary: Vec<WireSummary>,
        #[serde(default)]
        encrypted_content: Option<String>,
    },
    #[serde(other)]
    Other,
}

impl WireItem {
    /// The item's id, by which a server that sends no `output_index` names it.
    fn id(&self) -> Option<&str> {
        match self {
            WireItem::Message { id, .. } | WireItem::FunctionCall { id, .. } => id.as_deref(),
            WireItem::Reasoning { id, .. } => Some(id),
            WireItem::Other => None,
        }
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireContent {
    OutputText {
        text: String,
    },
    Refusal {
        refusal: String,
    },
    #[serde(other)]
    Other,
}

impl WireContent {
    fn text(self) -> Option<String> {
        match self {
            WireContent::OutputText { text } => Some(text),
            WireContent::Refusal { refusal } => Some(refusal),
            WireContent::Other => None,
        }
    }
}

#[derive(Deserialize)]
struct WireSummary {
    #[serde(default)]
    text: String,
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    incomplete_details: Option<WireIncomplete>,
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

#[derive(Deserialize)]
struct WireIncomplete {
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct WireError {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

impl From<WireError> for ProviderError {
    /// An overflow where the code or the words say so (`context_length_exceeded`), else the
    /// stream's failure in the server's words.
    fn from(error: WireError) -> Self {
        let message = error.message.clone().unwrap_or_default();
        let code = error.code.clone().unwrap_or_default();
        match crate::provider::overflow::from_words(&message, &code) {
            Some(overflow) => ProviderError::ContextOverflow(overflow),
            None => ProviderError::Stream(error.describe()),
        }
    }
}

impl WireError {
    /// The server's words, with its code when it gave one.
    fn describe(self) -> String {
        match (self.message.filter(|m| !m.is_empty()), self.code) {
            (Some(message), Some(code)) => format!("{message} ({code})"),
            (Some(message), None) => message,
            (None, Some(code)) => code,
            (None, None) => "the response failed without a reason".into(),
        }
    }
}
