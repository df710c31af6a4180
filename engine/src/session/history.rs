//! A session's conversation in memory.
//!
//! The messages live in an `Arc<Vec<Arc<Message>>>`: a request to the model takes a snapshot by
//! cloning one pointer, and appending copies nothing once that request is done with it. Every
//! message is sized once, when it enters (counted, or bounded while no count can matter: see
//! [`crate::tokens`]), and the total is kept as it goes, so per-turn work does not grow with
//! the length of the history.
//!
//! What the model sees is a window over the stored history: after a compaction the messages
//! before it are left out (they stay in the store), and a summary, when there is one, stands
//! first in their place.

use crate::message::{Message, ToolCall};
use crate::store::repair::{self, interrupted_result};
use crate::store::{Compaction, StoredMessage};
use crate::tokens;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// The conversation, and what of it is not yet handed to the store.
#[derive(Default)]
pub struct History {
    messages: Arc<Vec<Arc<Message>>>,
    /// Each message's size in tokens: counted, or where `bounded` says so, a bound.
    tokens: Vec<u32>,
    bounded: Vec<bool>,
    /// How many of `tokens` are only bounds.
    uncounted: usize,
    /// The stored seq of each message of the window; `None` for the summary and for results
    /// supplied in memory by a repair.
    seqs: Vec<Option<u64>>,
    total_tokens: u64,
    next_seq: u64,
    unsubmitted: Vec<StoredMessage>,
    /// A compaction not yet handed to the store.
    compaction: Option<Compaction>,
}

impl History {
    /// Rebuilds a session from its stored messages, repairing what a crash may have left: calls
    /// cut off at the end get results saying so (to be stored), faults elsewhere are mended in
    /// this view only. Calls at the end listed in `pending` (left by a run that paused) stay
    /// without results instead, for the next run to execute.
    /// With `compaction`, only the window it starts is loaded, behind its summary. `next_seq`
    /// is the seq after the last one stored.
    pub fn load(
        stored: Vec<StoredMessage>,
        next_seq: u64,
        compaction: Option<&Compaction>,
        pending: &[crate::ids::CallId],
    ) -> History {
        let first_kept = compaction.map_or(0, |c| c.first_kept_seq);
        // A compaction stored after a failed commit may point past the last stored message:
        // new messages must never take a seq inside the window's start.
        let next_seq = next_seq
            .max(stored.last().map_or(0, |m| m.seq + 1))
            .max(first_kept);
        let stored: Vec<StoredMessage> =
            stored.into_iter().filter(|m| m.seq >= first_kept).collect();
        let fault = repair::check(stored.iter().map(|m| m.message.as_ref()));
        let mut history = History {
            next_seq,
            ..History::default()
        };
        let last_non_result = stored
            .iter()
            .rposition(|m| !matches!(*m.message, Message::ToolResult { .. }));
        let orphaned: HashSet<usize> = fault.orphaned_results.iter().copied().collect();
        let mut mended_here: BTreeMap<usize, Vec<Message>> = BTreeMap::new();
        let mut cut_off_at_end = Vec::new();
        for (at, call) in fault.unanswered {
            if Some(at) >= last_non_result {
                if !pending.contains(&call.id) {
                    cut_off_at_end.push(interrupted_result(&call));
                }
            } else {
                tracing::warn!(call = %call.id, "a tool call in the middle of the history has no result; one is supplied");
                mended_here
                    .entry(at)
                    .or_default()
                    .push(interrupted_result(&call));
            }
        }
        if !orphaned.is_empty() {
            tracing::warn!(
                count = orphaned.len(),
                "tool results without their call were found and left out"
            );
        }
        if let Some(summary) = compaction.and_then(|c| c.summary.as_deref()) {
            history.put(Arc::new(crate::context::summary::message(summary)), None);
        }
        for (i, m) in stored.into_iter().enumerate() {
            if orphaned.contains(&i) {
                continue;
            }
            // A message stored uncounted (0) is bounded again; counted when it matters.
            let size = match m.tokens {
                0 => tokens::bound_message(&m.message),
                counted => tokens::Size::Counted(counted),
            };
            history.insert_loaded(m.message, size, Some(m.seq));
            for extra in mended_here.remove(&i).unwrap_or_default() {
                history.put(Arc::new(extra), None);
            }
        }
        for result in cut_off_at_end {
            history.push(result);
        }
        history
    }

    /// Adds a message to the window only (not to be stored), sizing it.
    fn put(&mut self, message: Arc<Message>, seq: Option<u64>) {
        let size = tokens::size_message(&message);
        self.insert_loaded(message, size, seq);
    }

    fn insert_loaded(&mut self, message: Arc<Message>, size: tokens::Size, seq: Option<u64>) {
        Arc::make_mut(&mut self.messages).push(message);
        let bounded = size.counted().is_none();
        self.tokens.push(size.tokens());
        self.bounded.push(bounded);
        self.uncounted += usize::from(bounded);
        self.seqs.push(seq);
        self.total_tokens += u64::from(size.tokens());
    }

    /// Appends `message`, sizing it; returns its seq.
    pub fn push(&mut self, message: Message) -> u64 {
        let size = tokens::size_message(&message);
        let message = Arc::new(message);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.insert_loaded(message.clone(), size, Some(seq));
        self.unsubmitted.push(StoredMessage {
            seq,
            // Stored uncounted as 0; counted later, it is counted again when loaded.
            tokens: size.counted().unwrap_or(0),
            message,
        });
        seq
    }

    /// Counts every message only bounded so far (building the tokenizer if it must).
    pub fn count_exactly(&mut self) {
        if self.uncounted == 0 {
            return;
        }
        let sized = self.tokens.iter_mut().zip(self.bounded.iter_mut());
        for ((tokens, bounded), message) in sized.zip(self.messages.iter()) {
            if std::mem::take(bounded) {
                let counted = tokens::count_message(message);
                self.total_tokens -= u64::from(*tokens) - u64::from(counted);
                *tokens = counted;
            }
        }
        self.uncounted = 0;
    }

    /// The conversation as it stands, shared.
    pub fn snapshot(&self) -> Arc<Vec<Arc<Message>>> {
        self.messages.clone()
    }

    /// Messages appended since the last call, to be stored.
    pub fn take_unsubmitted(&mut self) -> Vec<StoredMessage> {
        std::mem::take(&mut self.unsubmitted)
    }

    /// True when appended messages wait to be handed to the store.
    #[cfg(test)]
    pub fn has_unsubmitted(&self) -> bool {
        !self.unsubmitted.is_empty()
    }

    /// The seq the next message will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The conversation's size in tokens: counted when [`Self::is_counted`], else a bound.
    pub fn total_tokens(&self) -> u64 {
        self.total_tokens
    }

    /// Whether every message's size is counted, not only bounded.
    pub fn is_counted(&self) -> bool {
        self.uncounted == 0
    }

    /// Each message's size in tokens (counted, or bounded), in order.
    pub fn token_counts(&self) -> &[u32] {
        &self.tokens
    }

    /// Leaves the first `drop` messages out of the window and puts `summary`, if any, first in
    /// their place. The compaction is handed to the store with the next batch.
    pub fn compact(&mut self, drop: usize, summary: Option<String>) {
        let drop = drop.min(self.messages.len());
        // The window starts at the first kept message that is stored (never a repair's).
        let first_kept_seq = self.seqs[drop..]
            .iter()
            .flatten()
            .next()
            .copied()
            .unwrap_or(self.next_seq);
        let kept_messages = self.messages[drop..].to_vec();
        let kept_sizes: Vec<tokens::Size> = (drop..self.tokens.len())
            .map(|i| match self.bounded[i] {
                true => tokens::Size::AtMost(self.tokens[i]),
                false => tokens::Size::Counted(self.tokens[i]),
            })
            .collect();
        let kept_seqs = self.seqs[drop..].to_vec();
        self.messages = Arc::new(Vec::with_capacity(kept_messages.len() + 1));
        self.tokens.clear();
        self.bounded.clear();
        self.uncounted = 0;
        self.seqs.clear();
        self.total_tokens = 0;
        if let Some(text) = &summary {
            self.put(Arc::new(crate::context::summary::message(text)), None);
        }
        for ((m, t), seq) in kept_messages.into_iter().zip(kept_sizes).zip(kept_seqs) {
            self.insert_loaded(m, t, seq);
        }
        self.compaction = Some(Compaction {
            first_kept_seq,
            summary,
        });
    }

    /// A compaction made since the last call, to be stored.
    pub fn take_compaction(&mut self) -> Option<Compaction> {
        self.compaction.take()
    }

    /// The calls of the last answer that have no result yet: left pending by a run that paused
    /// (an interrupt, `max_turns`), for the next run to execute first.
    pub fn pending_calls(&self) -> Vec<ToolCall> {
        let mut answered = HashSet::new();
        for message in self.messages.iter().rev() {
            match message.as_ref() {
                Message::ToolResult { call_id, .. } => {
                    answered.insert(call_id.clone());
                }
                other => {
                    return other
                        .tool_calls()
                        .iter()
                        .filter(|c| !answered.contains(&c.id))
                        .cloned()
                        .collect();
                }
            }
        }
        Vec::new()
    }

    /// True when the conversation ends with the model's answer (no calls waiting for results).
    pub fn ends_with_answer(&self) -> bool {
        self.messages.last().is_some_and(|m| {
            matches!(m.as_ref(), Message::Assistant { tool_calls, .. } if tool_calls.is_empty())
        })
    }

    /// The model's answers since the last prompt: the turns a run that continues without a
    /// prompt of its own has already used.
    pub fn turns_since_prompt(&self) -> u32 {
        let answers = self
            .messages
            .iter()
            .rev()
            .take_while(|m| !matches!(m.as_ref(), Message::User { .. }))
            .filter(|m| matches!(m.as_ref(), Message::Assistant { .. }))
            .count();
        u32::try_from(answers).unwrap_or(u32::MAX)
    }

    /// How many messages the conversation holds.
    #[cfg(any(test, feature = "testing"))]
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// True for a conversation without messages.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::CallId;
    use crate::message::ToolCall;

    fn stored(seq: u64, m: Message) -> StoredMessage {
        StoredMessage {
            seq,
            tokens: tokens::count_message(&m),
            message: Arc::new(m),
        }
    }

    #[test]
    fn a_call_cut_off_at_the_end_gets_a_stored_result() {
        let call = ToolCall {
            id: CallId::new("c1"),
            name: "bash".into(),
            arguments: "{\"command\":\"make\"}".into(),
        };
        let h = History::load(
            vec![
                stored(0, Message::user("go")),
                stored(
                    1,
                    Message::Assistant {
                        content: String::new(),
                        tool_calls: vec![call.clone()],
                    },
                ),
            ],
            2,
            None,
            &[],
        );
        assert_eq!(h.len(), 3);
        assert_eq!(h.next_seq(), 3);
        assert!(h.has_unsubmitted());
        assert!(crate::store::repair::check(h.snapshot().iter().map(|m| m.as_ref())).is_clean());
        assert!(h.pending_calls().is_empty());
    }

    #[test]
    fn calls_left_by_a_paused_run_stay_pending() {
        let call = |id: &str| ToolCall {
            id: CallId::new(id),
            name: "bash".into(),
            arguments: "{}".into(),
        };
        let result = Message::ToolResult {
            call_id: CallId::new("a"),
            name: "bash".into(),
            content: "done".into(),
            is_error: false,
        };
        let h = History::load(
            vec![
                stored(0, Message::user("go")),
                stored(
                    1,
                    Message::Assistant {
                        content: String::new(),
                        tool_calls: vec![call("x")],
                    },
                ),
                stored(
                    2,
                    Message::ToolResult {
                        call_id: CallId::new("x"),
                        name: "bash".into(),
                        content: "ok".into(),
                        is_error: false,
                    },
                ),
                stored(
                    3,
                    Message::Assistant {
                        content: String::new(),
                        tool_calls: vec![call("a"), call("b")],
                    },
                ),
                stored(4, result),
            ],
            5,
            None,
            &[CallId::new("b")],
        );
        assert_eq!(h.len(), 5);
        assert!(!h.has_unsubmitted());
        assert_eq!(h.pending_calls(), vec![call("b")]);
        assert_eq!(h.turns_since_prompt(), 2);
    }

    #[test]
    fn a_compaction_keeps_the_window_behind_its_summary_and_reloads_the_same() {
        let mut h = History::default();
        for i in 0..6 {
            h.push(Message::user(format!("message {i}")));
        }
        let stored: Vec<StoredMessage> = h.take_unsubmitted();
        h.compact(4, Some("the first four".into()));
        let compaction = h.take_compaction().expect("a compaction to store");
        assert_eq!(compaction.first_kept_seq, 4);
        let view = h.snapshot();
        assert_eq!(view.len(), 3);
        assert!(
            matches!(&*view[0], Message::System { content } if content.contains("the first four"))
        );
        let counted: u64 = view
            .iter()
            .map(|m| u64::from(tokens::count_message(m)))
            .sum();
        // Sizes not counted yet are bounds, never below the count.
        assert!(h.total_tokens() >= counted);
        h.count_exactly();
        assert!(h.is_counted());
        assert_eq!(h.total_tokens(), counted, "the total is the window's");
        // The store reads only the window.
        let window: Vec<StoredMessage> = stored.into_iter().filter(|m| m.seq >= 4).collect();
        let mut reloaded = History::load(window, 6, Some(&compaction), &[]);
        assert_eq!(*reloaded.snapshot(), *view);
        reloaded.count_exactly();
        assert_eq!(reloaded.total_tokens(), h.total_tokens());
        assert_eq!(reloaded.next_seq(), 6);
    }

    #[test]
    fn a_window_starting_past_the_stored_messages_never_reuses_a_seq() {
        // The compaction was stored; the messages of the batch after it were not.
        let compaction = Compaction {
            first_kept_seq: 9,
            summary: Some("earlier".into()),
        };
        let h = History::load(
            vec![stored(7, Message::user("old"))],
            8,
            Some(&compaction),
            &[],
        );
        assert_eq!(h.next_seq(), 9);
    }

    #[test]
    fn appending_after_a_snapshot_is_dropped_does_not_copy() {
        let mut h = History::default();
        h.push(Message::user("a"));
        let snap = h.snapshot();
        let before = Arc::as_ptr(&snap);
        drop(snap);
        h.push(Message::user("b"));
        assert_eq!(Arc::as_ptr(&h.snapshot()), before);
        assert_eq!(h.take_unsubmitted().len(), 2);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// A valid conversation: turns of a user message, then assistant messages whose calls
        /// are each answered (in any order) before the next message.
        fn conversation() -> impl Strategy<Value = Vec<Message>> {
            let turn = (0usize..4, any::<u64>());
            prop::collection::vec(prop::collection::vec(turn, 1..4), 1..6).prop_map(|runs| {
                let mut out = Vec::new();
                let mut next_id = 0;
                for (r, steps) in runs.into_iter().enumerate() {
                    out.push(Message::user(format!("prompt {r}")));
                    for (calls, shuffle) in steps {
                        let calls: Vec<ToolCall> = (0..calls)
                            .map(|_| {
                                next_id += 1;
                                ToolCall {
                                    id: CallId::new(format!("c{next_id}")),
                                    name: "read".into(),
                                    arguments: "{}".into(),
                                }
                            })
                            .collect();
                        let mut results: Vec<Message> = calls
                            .iter()
                            .map(|c| Message::ToolResult {
                                call_id: c.id.clone(),
                                name: c.name.clone(),
                                content: "r".into(),
                                is_error: false,
                            })
                            .collect();
                        let turn_by = (shuffle as usize) % results.len().max(1);
                        results.rotate_left(turn_by);
                        out.push(Message::Assistant {
                            content: "a".into(),
                            tool_calls: calls,
                        });
                        out.extend(results);
                    }
                }
                out
            })
        }

        proptest! {
            /// A crash can leave any prefix of the appended history; every one of them loads
            /// into a history with no orphaned call or result, keeping every stored message in
            /// order and adding results only at the end.
            #[test]
            fn any_crash_point_reloads_without_orphans(
                messages in conversation(),
                cut in any::<prop::sample::Index>(),
            ) {
                let keep = cut.index(messages.len() + 1);
                let prefix: Vec<StoredMessage> = messages[..keep]
                    .iter()
                    .enumerate()
                    .map(|(i, m)| stored(i as u64, m.clone()))
                    .collect();
                let h = History::load(prefix, 0, None, &[]);
                let view = h.snapshot();
                prop_assert!(crate::store::repair::check(view.iter().map(|m| m.as_ref())).is_clean());
                prop_assert_eq!(&view[..keep].iter().map(|m| (**m).clone()).collect::<Vec<_>>(), &messages[..keep]);
                prop_assert_eq!(h.next_seq(), view.len() as u64);
                for added in &view[keep..] {
                    let is_interrupted_result = matches!(added.as_ref(), Message::ToolResult { is_error: true, .. });
                    prop_assert!(is_interrupted_result);
                }
            }
        }
    }
}
