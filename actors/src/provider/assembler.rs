//! Assembling a streamed answer: text pieces joined, tool calls built from fragments that may
//! be spread over many chunks and interleaved by index.

use super::{FinishReason, ProviderError, StreamDelta, Usage};
use crate::ids::CallId;
use crate::message::{Reasoning, ToolCall};

/// The model's complete answer to one request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AssistantResponse {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish: Option<FinishReason>,
    pub usage: Option<Usage>,
    /// The server's id for the answer, when it gave one.
    pub id: Option<String>,
    /// The reasoning items the answer came with, in order.
    pub reasoning: Vec<Reasoning>,
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
    id: Option<String>,
    reasoning: Vec<Reasoning>,
}

impl ResponseAssembler {
    /// A new, empty answer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one delta.
    pub fn push(&mut self, delta: StreamDelta) {
        match delta {
            StreamDelta::Text { text: t } => self.text.push_str(&t),
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
            StreamDelta::Usage { usage: u } => self.usage = Some(u),
            StreamDelta::Finish { reason: f } => self.finish = Some(f),
            StreamDelta::ResponseId { id } => {
                self.id.get_or_insert(id);
            }
            StreamDelta::Reasoning { item } => self.reasoning.push(item),
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
            id: self.id,
            reasoning: self.reasoning,
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
        a.push(StreamDelta::Text {
            text: "Look".into(),
        });
        a.push(frag(1, Some("c2"), Some("glob"), Some("")));
        a.push(frag(0, Some("c1"), Some("read"), Some("{\"pa")));
        a.push(frag(1, None, None, Some("{\"pattern\":\"*.rs\"}")));
        a.push(frag(0, None, None, Some("th\":\"a.txt\"}")));
        a.push(StreamDelta::Finish {
            reason: FinishReason::ToolCalls,
        });
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
        a.push(StreamDelta::Text {
            text: "half".into(),
        });
        assert!(matches!(a.finish(false), Err(ProviderError::StreamCut(_))));
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// However a server splits and interleaves the argument text of several calls,
            /// each call comes out whole, in index order.
            #[test]
            fn fragments_reassemble_whatever_the_split(
                args in prop::collection::vec("[ -~é😀]{0,40}", 1..4),
                cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
                order in any::<u64>(),
            ) {
                let mut fragments: Vec<(usize, String)> = Vec::new();
                for (index, text) in args.iter().enumerate() {
                    let chars: Vec<char> = text.chars().collect();
                    let mut points: Vec<usize> = cuts.iter().map(|c| c.index(chars.len() + 1)).collect();
                    points.push(0);
                    points.push(chars.len());
                    points.sort_unstable();
                    points.dedup();
                    for w in points.windows(2) {
                        fragments.push((index, chars[w[0]..w[1]].iter().collect()));
                    }
                }
                // Interleave: a stable shuffle that keeps each call's own fragments in order.
                let mut queues: Vec<std::collections::VecDeque<String>> = vec![Default::default(); args.len()];
                for (i, f) in fragments {
                    queues[i].push_back(f);
                }
                let mut a = ResponseAssembler::new();
                for (i, _) in args.iter().enumerate() {
                    a.push(frag(i, Some(&format!("id{i}")), Some("read"), None));
                }
                let mut state = order;
                while queues.iter().any(|q| !q.is_empty()) {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let live: Vec<usize> = (0..queues.len()).filter(|&i| !queues[i].is_empty()).collect();
                    let i = live[(state >> 33) as usize % live.len()];
                    let f = queues[i].pop_front().unwrap_or_default();
                    a.push(frag(i, None, None, Some(&f)));
                }
                let r = a.finish(true).unwrap();
                prop_assert_eq!(r.tool_calls.len(), args.len());
                for (i, call) in r.tool_calls.iter().enumerate() {
                    prop_assert_eq!(&call.arguments, &args[i]);
                    let expected = format!("id{i}");
                    prop_assert_eq!(call.id.as_str(), expected.as_str());
                }
            }
        }
    }
}
