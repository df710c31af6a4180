//! The conversation a rewind leaves: the window as it stood at the point, copied after the
//! session's last message (the store is append-only: what came after stays there, out of the
//! window, as a compaction leaves messages), behind the summary it had then. A call the point
//! left without a result (one a paused run left pending) gets one saying it did not run, so
//! the next request pairs every call with its result.

use crate::ids::CallId;
use crate::message::Message;
use crate::store::{Compaction, SessionHistory, StoredMessage};
use ryvos_protocol::records::{CompactionNote, RewindPoint};
use std::collections::HashSet;
use std::sync::Arc;

/// The messages and the window record a rewind to `point` stores.
pub(super) struct NewWindow {
    pub messages: Vec<StoredMessage>,
    pub compaction: Compaction,
}

/// The window of `point`, from `stored`'s messages, with `summary`, put after them; `label`
/// names the point.
pub(super) fn at(
    stored: &SessionHistory,
    point: &RewindPoint,
    summary: Option<String>,
    label: &str,
    at_ms: u64,
) -> NewWindow {
    let then = stored
        .messages
        .iter()
        .filter(|m| (point.window_from..point.upto).contains(&m.seq));
    let answered: HashSet<&CallId> = then
        .clone()
        .filter_map(|m| match m.message.as_ref() {
            Message::ToolResult { call_id, .. } => Some(call_id),
            _ => None,
        })
        .collect();
    let first = stored.next_seq;
    let mut seq = first;
    let mut messages = Vec::new();
    let mut push = |message: Arc<Message>, tokens: u32| {
        messages.push(StoredMessage {
            seq,
            tokens,
            message,
        });
        seq += 1;
    };
    let mut unanswered = Vec::new();
    for m in then {
        if !matches!(m.message.as_ref(), Message::ToolResult { .. }) {
            // Results come right after the answer that asked: missing ones go before the next.
            for (call_id, name) in unanswered.drain(..) {
                push(Arc::new(not_run(call_id, name)), 0);
            }
        }
        for call in m.message.tool_calls() {
            if !answered.contains(&call.id) {
                unanswered.push((call.id.clone(), call.name.clone()));
            }
        }
        push(m.message.clone(), m.tokens);
    }
    for (call_id, name) in unanswered {
        push(Arc::new(not_run(call_id, name)), 0);
    }
    let current = stored.compaction.as_ref();
    let mut earlier = current.map(|c| c.earlier.clone()).unwrap_or_default();
    if let Some(c) = current.filter(|c| c.rewound_to.is_none() && c.undone_at_ms.is_none()) {
        earlier.push(CompactionNote::of(c));
    }
    let skip = earlier.len().saturating_sub(CompactionNote::KEPT);
    earlier.drain(..skip);
    let compaction = Compaction {
        first_kept_seq: first,
        first_seq: current.map_or(0, |c| c.first_kept_seq),
        summary,
        at_ms,
        earlier,
        rewound_to: Some(label.to_owned()),
        ..Compaction::default()
    };
    NewWindow {
        messages,
        compaction,
    }
}

/// The result of a call the point left pending.
fn not_run(call_id: CallId, name: String) -> Message {
    Message::ToolResult {
        call_id,
        name,
        content: "not run: the session was rewound to before this call ran".into(),
        is_error: true,
    }
}
