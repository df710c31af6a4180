//! A session's conversation in memory.
//!
//! The messages live in an `Arc<Vec<Arc<Message>>>`: a request to the model takes a snapshot by
//! cloning one pointer, and appending copies nothing once that request is done with it. Every
//! message is sized once, when it enters (counted, or bounded while no count can matter: see
//! [`crate::tokens`]), and the total is kept as it goes, so per-turn work does not grow with
//! the length of the history.
//!
//! While sizes are only bounded, the model server's own count of the last request it was sent
//! (`prompt_tokens`) measures that part of the window far more tightly than the bound, so the
//! conversation is measured by that count plus the bounds of what came after it; see
//! [`History::measured_tokens`].
//!
//! What the model sees is a window over the stored history: after a compaction the messages
//! before it are left out (they stay in the store), and a summary, when there is one, stands
//! first in their place.

use crate::message::{Message, ToolCall};
use crate::store::repair::{self, interrupted_result};
use crate::store::{Compaction, StoredMessage};
use crate::tokens;
use ryvos_protocol::records::{CompactionNote, Window, WindowMeasure};
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
    /// Changes whenever messages leave the window, so a measure of an older window is not
    /// taken for this one.
    epoch: u64,
    /// The server's count of the window's first messages, as it last reported it.
    measured: Option<Measured>,
    /// The seq the window starts at: after the last compaction, 0 without one.
    window_start: u64,
    /// The summary the window starts with, if it has one.
    summary: Option<String>,
    /// The last compaction handed to the store (the one the session was loaded with, or a
    /// later one): the next one remembers it.
    stored_compaction: Option<Compaction>,
}

/// The window as a request to the model took it; see [`History::mark`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mark {
    len: usize,
    epoch: u64,
}

/// The model server's count of a request whose conversation was the window's first `len`
/// messages (with the system prompt, the tools and the framing).
#[derive(Clone, Copy, Debug)]
struct Measured {
    len: usize,
    tokens: u64,
    /// The system prompt's size (counted, or bounded) when it was measured.
    system: u64,
}

/// A count under one token per this many bytes of the request's bound is not a count of the
/// whole request (a server that leaves cached input out of it, or a stub), and is not used.
/// Real tokenizers average 3 to 5 bytes per token.
const MAX_BYTES_PER_TOKEN: u64 = 16;

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
            window_start: first_kept,
            summary: compaction.and_then(|c| c.summary.clone()),
            stored_compaction: compaction.cloned(),
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
    /// their place. The compaction is handed to the store with the next batch; its record is
    /// returned for the caller to complete (what the summary kept, the sizes).
    pub fn compact(&mut self, drop: usize, summary: Option<String>) -> &mut Compaction {
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
        let previous = Window {
            first_kept_seq: self.window_start,
            summary: std::mem::replace(&mut self.summary, summary.clone()),
        };
        let earlier = self.earlier_compactions();
        self.window_start = first_kept_seq;
        self.epoch += 1;
        self.measured = None;
        self.compaction.insert(Compaction {
            first_kept_seq,
            summary,
            first_seq: previous.first_kept_seq,
            at_ms: crate::store::now_ms(),
            previous: Some(previous),
            earlier,
            ..Compaction::default()
        })
    }

    /// The compactions before the one being made: the last one's, and the last one itself
    /// unless it was undone (at most [`CompactionNote::KEPT`]).
    fn earlier_compactions(&self) -> Vec<CompactionNote> {
        let Some(last) = self.compaction.as_ref().or(self.stored_compaction.as_ref()) else {
            return Vec::new();
        };
        let mut earlier = last.earlier.clone();
        if last.undone_at_ms.is_none() {
            earlier.push(CompactionNote::of(last));
        }
        let excess = earlier.len().saturating_sub(CompactionNote::KEPT);
        earlier.drain(..excess);
        earlier
    }

    /// The window as it stands, for a request to the model: see [`Self::measure`].
    pub fn mark(&self) -> Mark {
        Mark {
            len: self.messages.len(),
            epoch: self.epoch,
        }
    }

    /// Keeps the server's count of a request made at `mark`, unless the window has lost
    /// messages since, or the count is implausibly small for the request's bound (the
    /// conversation's, plus `system`'s).
    pub fn measure(&mut self, mark: Mark, server_tokens: u64, system: u64) {
        if mark.epoch != self.epoch || mark.len > self.messages.len() {
            return;
        }
        let sent = self.total_tokens - self.sizes_from(mark.len);
        if server_tokens.saturating_mul(MAX_BYTES_PER_TOKEN) < sent + system {
            return;
        }
        self.measured = Some(Measured {
            len: mark.len,
            tokens: server_tokens,
            system,
        });
    }

    /// The window's size by the server's last count (which covers the system prompt too)
    /// and the sizes of the messages after it, with a system prompt now of `system` tokens
    /// (what it grew by since is added); `None` before any count.
    pub fn measured_tokens(&self, system: u64) -> Option<u64> {
        let m = self.measured?;
        Some(m.tokens + self.sizes_from(m.len) + system.saturating_sub(m.system))
    }

    /// The server's last count as the session's record keeps it, so that a resumed session
    /// knows its size without the tokenizer.
    pub fn window_measure(&self) -> Option<WindowMeasure> {
        let m = self.measured?;
        // The first message the request did not carry; seqs rise along the window.
        let before_seq = self.seqs[m.len..]
            .iter()
            .flatten()
            .next()
            .copied()
            .unwrap_or(self.next_seq);
        Some(WindowMeasure {
            window_start: self.window_start,
            before_seq,
            tokens: m.tokens,
            system_tokens: m.system,
        })
    }

    /// Takes up a count kept on the session's record, if it is of this window.
    pub fn restore_measure(&mut self, kept: &WindowMeasure) {
        if kept.window_start != self.window_start || self.measured.is_some() {
            return;
        }
        // The request carried every message before `before_seq` (the summary and repairs
        // among them have no seq, and stand with their neighbours).
        let len = self
            .seqs
            .iter()
            .position(|seq| seq.is_some_and(|s| s >= kept.before_seq))
            .unwrap_or(self.messages.len());
        self.measured = Some(Measured {
            len,
            tokens: kept.tokens,
            system: kept.system_tokens,
        });
    }

    /// The sizes of the messages from index `first` on: the few appended since a request.
    fn sizes_from(&self, first: usize) -> u64 {
        self.tokens[first..].iter().map(|&t| u64::from(t)).sum()
    }

    /// Trims the largest tool results in the window, largest first, until about `need` tokens
    /// are freed: each keeps its first `keep` tokens' worth of text (four bytes a token) and
    /// `note` of how many bytes were cut. The store keeps them whole. Each trimmed result's
    /// tool, and its size before and after.
    pub fn trim_results(
        &mut self,
        need: u64,
        keep: u64,
        note: impl Fn(usize) -> String,
    ) -> Vec<(String, u64, u64)> {
        let mut largest: Vec<usize> = (0..self.messages.len())
            .filter(|&i| matches!(*self.messages[i], Message::ToolResult { .. }))
            .collect();
        largest.sort_by_key(|&i| std::cmp::Reverse(self.tokens[i]));
        let mut trimmed = Vec::new();
        let mut freed = 0;
        for i in largest {
            let before = u64::from(self.tokens[i]);
            if freed >= need || before <= keep {
                break;
            }
            let Message::ToolResult {
                call_id,
                name,
                content,
                is_error,
            } = &*self.messages[i]
            else {
                continue;
            };
            let mut cut = usize::try_from(keep * 4)
                .unwrap_or(usize::MAX)
                .min(content.len());
            while !content.is_char_boundary(cut) {
                cut -= 1;
            }
            let message = Message::ToolResult {
                call_id: call_id.clone(),
                name: name.clone(),
                content: format!("{}\n{}", &content[..cut], note(content.len() - cut)),
                is_error: *is_error,
            };
            let size = tokens::size_message(&message);
            let after = u64::from(size.tokens());
            trimmed.push((name.clone(), before, after));
            freed += before.saturating_sub(after);
            self.total_tokens = self.total_tokens - before + after;
            let bounded = size.counted().is_none();
            self.uncounted = self.uncounted - usize::from(self.bounded[i]) + usize::from(bounded);
            self.bounded[i] = bounded;
            self.tokens[i] = size.tokens();
            Arc::make_mut(&mut self.messages)[i] = Arc::new(message);
        }
        if !trimmed.is_empty() {
            // The server's last count was of the window before.
            self.epoch += 1;
            self.measured = None;
        }
        trimmed
    }

    /// Where the window starts, and the summary before it.
    pub fn window(&self) -> (u64, Option<&str>) {
        (self.window_start, self.summary.as_deref())
    }

    /// The compaction made since the last call, not yet stored, to complete.
    pub fn compaction_mut(&mut self) -> Option<&mut Compaction> {
        self.compaction.as_mut()
    }

    /// A compaction made since the last call, to be stored.
    pub fn take_compaction(&mut self) -> Option<Compaction> {
        let taken = self.compaction.take();
        if let Some(compaction) = &taken {
            self.stored_compaction = Some(compaction.clone());
        }
        taken
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

    /// The stored seq of the message that made call `call` (the latest such), if it is in the
    /// window and stored.
    pub fn seq_of_call(&self, call: &crate::ids::CallId) -> Option<u64> {
        let made = (self.messages.iter().zip(&self.seqs).rev())
            .find(|(m, _)| m.tool_calls().iter().any(|c| c.id == *call));
        made.and_then(|(_, seq)| *seq)
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
mod tests;
