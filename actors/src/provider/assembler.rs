//! Assembling a streamed answer: text pieces joined, tool calls built from fragments that may
//! be spread over many chunks and interleaved by index.

use super::{FinishReason, ProviderError, StreamDelta, Usage};
use crate::ids::CallId;
use crate::message::ToolCall;

/// The model's complete answer to one request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AssistantResponse {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish: Option<FinishReason>,
    pub usage: Option<Usage>,
}

#[derive(Default)]
struct PartialCall {
    index: usize,
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Folds [`StreamDelta`]s into an [`AssistantResponse`].
#[derive(Default)]
pub struct ResponseAssembler {
    text: String,
    calls: Vec<PartialCall>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
}

impl ResponseAssembler {
    /// A new, empty answer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one delta.
    pub fn push(&mut self, delta: StreamDelta) {
        match delta {
            StreamDelta::Text(t) => self.text.push_str(&t),
            StreamDelta::ToolCall {
                index,
                id,
                name,
                arguments,
            } => {
                let call = self.call_at(index, id.as_deref());
                if let Some(id) = id {
                    call.id.get_or_insert(id);
                }
                if let Some(name) = name {
                    call.name.push_str(&name);
                }
                if let Some(args) = arguments {
                    call.arguments.push_str(&args);
                }
            }
            StreamDelta::Usage(u) => self.usage = Some(u),
            StreamDelta::Finish(f) => self.finish = Some(f),
        }
    }

    /// The call a fragment belongs to: the latest one at `index`, unless the fragment carries
    /// a different id, which some servers use to start a new call at a reused index.
    fn call_at(&mut self, index: usize, id: Option<&str>) -> &mut PartialCall {
        let existing = self.calls.iter().rposition(|c| c.index == index);
        let position = match existing {
            Some(p)
                if id.is_none()
                    || self.calls[p].id.is_none()
                    || self.calls[p].id.as_deref() == id =>
            {
                p
            }
            _ => {
                self.calls.push(PartialCall {
                    index,
                    ..PartialCall::default()
                });
                self.calls.len() - 1
            }
        };
        &mut self.calls[position]
    }

    /// True once the model said why it stopped.
    pub fn is_finished(&self) -> bool {
        self.finish.is_some()
    }

    /// The answer so far, for estimating output tokens.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The complete answer. `saw_end` tells whether the stream ended properly (`[DONE]` or its
    /// provider's equivalent); without it and without a finish reason the stream was cut.
    pub fn finish(mut self, saw_end: bool) -> Result<AssistantResponse, ProviderError> {
        if !saw_end && self.finish.is_none() {
            return Err(ProviderError::StreamCut(format!(
                "the stream ended after {} characters of text and {} tool call(s), without a \
                 finish reason",
                self.text.chars().count(),
                self.calls.len()
            )));
        }
        // Calls in the order the model made them: by index, then by arrival.
        self.calls.sort_by_key(|c| c.index);
        let tool_calls = self
            .calls
            .into_iter()
            .map(|c| ToolCall {
                id: c.id.map(CallId::new).unwrap_or_else(CallId::generate),
                name: c.name,
                arguments: c.arguments,
            })
            .collect();
        Ok(AssistantResponse {
            text: self.text,
            tool_calls,
            finish: self.finish,
            usage: self.usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frag(index: usize, id: Option<&str>, name: Option<&str>, args: Option<&str>) -> StreamDelta {
        StreamDelta::ToolCall {
            index,
            id: id.map(Into::into),
            name: name.map(Into::into),
            arguments: args.map(Into::into),
        }
    }

    #[test]
    fn interleaved_fragments_make_whole_calls_in_index_order() {
        let mut a = ResponseAssembler::new();
        a.push(StreamDelta::Text("Look".into()));
        a.push(frag(1, Some("c2"), Some("glob"), Some("")));
        a.push(frag(0, Some("c1"), Some("read"), Some("{\"pa")));
        a.push(frag(1, None, None, Some("{\"pattern\":\"*.rs\"}")));
        a.push(frag(0, None, None, Some("th\":\"a.txt\"}")));
        a.push(StreamDelta::Finish(FinishReason::ToolCalls));
        let r = a.finish(true).unwrap();
        assert_eq!(r.text, "Look");
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(r.tool_calls[0].id.as_str(), "c1");
        assert_eq!(r.tool_calls[0].arguments, "{\"path\":\"a.txt\"}");
        assert_eq!(r.tool_calls[1].name, "glob");
    }

    #[test]
    fn a_new_id_at_a_reused_index_starts_a_new_call() {
        let mut a = ResponseAssembler::new();
        a.push(frag(0, Some("c1"), Some("read"), Some("{}")));
        a.push(frag(0, Some("c2"), Some("glob"), Some("{}")));
        let r = a.finish(true).unwrap();
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(r.tool_calls[1].id.as_str(), "c2");
    }

    #[test]
    fn a_stream_without_end_or_finish_is_cut() {
        let mut a = ResponseAssembler::new();
        a.push(StreamDelta::Text("half".into()));
        assert!(matches!(a.finish(false), Err(ProviderError::StreamCut(_))));
    }
}
