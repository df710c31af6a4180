//! Making a loaded history valid for providers.
//!
//! Providers reject a history in which a tool call has no result, or a result has no call. The
//! writer stores calls before results, so a crash can only leave calls without results, at the
//! end of a session; those get results that say what happened, which are then stored. A result
//! whose call is missing cannot be produced by the writer, but if one is found it is left out of
//! the conversation rather than sent.

use crate::ids::CallId;
use crate::message::{Message, ToolCall};
use std::collections::HashSet;

/// The result recorded for a call whose run was cut off before the call's result was stored.
pub fn interrupted_result(call: &ToolCall) -> Message {
    Message::ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content: "execution_error: the run was interrupted before this call's result was \
                  recorded; it may or may not have run. Check its effects before repeating it."
            .into(),
        is_error: true,
    }
}

/// The outcome of checking a history.
#[derive(Debug, Default, PartialEq)]
pub struct Repair {
    /// Indexes of results with no matching call: left out of the conversation.
    pub orphaned_results: Vec<usize>,
    /// Calls without a result, in order, with the index of the message after which their
    /// results belong. Those at the end of the history are appended; others are inserted in
    /// the loaded view only.
    pub unanswered: Vec<(usize, ToolCall)>,
}

impl Repair {
    /// True when the history needs no change.
    #[cfg(any(test, feature = "testing"))]
    pub fn is_clean(&self) -> bool {
        self.orphaned_results.is_empty() && self.unanswered.is_empty()
    }
}

/// Finds every pairing fault in `messages`.
pub fn check<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Repair {
    let mut repair = Repair::default();
    // The calls of the latest assistant message still waiting for results, and where their
    // block of results ends.
    let mut open: Vec<ToolCall> = Vec::new();
    let mut answered: HashSet<CallId> = HashSet::new();
    let mut block_end = 0usize;
    let flush =
        |open: &mut Vec<ToolCall>, answered: &mut HashSet<CallId>, at: usize, r: &mut Repair| {
            for call in open.drain(..) {
                if !answered.contains(&call.id) {
                    r.unanswered.push((at, call));
                }
            }
            answered.clear();
        };
    for (i, message) in messages.into_iter().enumerate() {
        match message {
            Message::ToolResult { call_id, .. } => {
                if open.iter().any(|c| &c.id == call_id) && answered.insert(call_id.clone()) {
                    block_end = i;
                } else {
                    repair.orphaned_results.push(i);
                }
            }
            other => {
                flush(&mut open, &mut answered, block_end, &mut repair);
                block_end = i;
                open.extend(other.tool_calls().iter().cloned());
            }
        }
    }
    flush(&mut open, &mut answered, block_end, &mut repair);
    repair
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: CallId::new(id),
            name: "read".into(),
            arguments: "{}".into(),
        }
    }
    fn assistant(ids: &[&str]) -> Message {
        Message::Assistant {
            content: String::new(),
            tool_calls: ids.iter().map(|i| call(i)).collect(),
            reasoning: Vec::new(),
        }
    }
    fn result(id: &str) -> Message {
        interrupted_result(&call(id))
    }

    #[test]
    fn a_clean_history_needs_nothing() {
        let h = [
            Message::user("hi"),
            assistant(&["a", "b"]),
            result("b"),
            result("a"),
        ];
        assert!(check(&h).is_clean());
    }

    #[test]
    fn finds_calls_cut_off_at_the_end() {
        let h = [Message::user("hi"), assistant(&["a", "b"]), result("a")];
        let r = check(&h);
        assert_eq!(r.unanswered, vec![(2, call("b"))]);
        assert!(r.orphaned_results.is_empty());
    }

    #[test]
    fn finds_orphaned_results_and_mid_history_gaps() {
        let h = [
            Message::user("hi"),
            result("x"),
            assistant(&["a"]),
            Message::user("again"),
            result("a"),
        ];
        let r = check(&h);
        assert_eq!(r.orphaned_results, vec![1, 4]);
        assert_eq!(r.unanswered, vec![(2, call("a"))]);
    }
}
