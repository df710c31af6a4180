//! Pruning: which leading messages to drop so that the conversation fits its budget.
//!
//! The cut never falls inside a tool call's group (an assistant message with calls and the
//! results that follow it), so the kept conversation never starts with a tool result and never
//! holds a call without its result; the last `min_tail` messages are always kept. The decision
//! whether to prune is O(1) (the total is kept as messages come); finding the cut walks only the
//! messages it drops.

use crate::message::Message;
use std::sync::Arc;

/// Where to cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cut {
    /// How many leading messages are dropped.
    pub drop: usize,
    /// Their tokens.
    pub tokens: u64,
    /// False when even the deepest allowed cut leaves the conversation over the target.
    pub fits: bool,
}

/// The cut that brings `messages` (with `tokens[i]` each, `total` in all, plus `reserve` for
/// what replaces the dropped part) down to `target`, dropping as little as possible; or the
/// deepest allowed cut when none does. `None` when nothing needs to go, or nothing may.
pub fn prune_to_budget(
    messages: &[Arc<Message>],
    tokens: &[u32],
    total: u64,
    target: u64,
    reserve: u64,
    min_tail: usize,
) -> Option<Cut> {
    if total + reserve <= target {
        return None;
    }
    let deepest = messages.len().saturating_sub(min_tail);
    let mut dropped = 0u64;
    let mut best = None;
    for drop in 1..=deepest {
        dropped += u64::from(tokens[drop - 1]);
        // The first kept message may not be a tool result: that would split a call's group.
        let boundary = messages
            .get(drop)
            .is_none_or(|m| !matches!(**m, Message::ToolResult { .. }));
        if !boundary {
            continue;
        }
        let fits = total - dropped + reserve <= target;
        best = Some(Cut {
            drop,
            tokens: dropped,
            fits,
        });
        if fits {
            break;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::CallId;
    use crate::message::ToolCall;
    use crate::tokens;
    use proptest::prelude::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: CallId::new(id),
            name: "read".into(),
            arguments: "{}".into(),
        }
    }

    /// A well-formed conversation: user messages, answers, and call groups of 1–3 calls, with
    /// text of random sizes.
    fn conversation() -> impl Strategy<Value = Vec<Message>> {
        let text = "[a-z ]{0,200}";
        let step = prop_oneof![
            text.prop_map(Message::user),
            text.prop_map(|t| Message::Assistant {
                content: t,
                tool_calls: Vec::new(),
                reasoning: Vec::new(),
            }),
            (1usize..4, text).prop_map(|(n, t)| Message::System {
                content: format!("group:{n}:{t}")
            }),
        ];
        proptest::collection::vec(step, 0..60).prop_map(|steps| {
            let mut out = Vec::new();
            for (i, m) in steps.into_iter().enumerate() {
                // A System message stands for a call group, expanded here.
                if let Message::System { content } = &m {
                    let mut parts = content.splitn(3, ':').skip(1);
                    let n: usize = parts.next().unwrap().parse().unwrap();
                    let body = parts.next().unwrap_or_default().to_owned();
                    let calls: Vec<ToolCall> = (0..n).map(|k| call(&format!("c{i}_{k}"))).collect();
                    out.push(Message::Assistant {
                        content: String::new(),
                        tool_calls: calls.clone(),
                        reasoning: Vec::new(),
                    });
                    for c in calls {
                        out.push(Message::ToolResult {
                            call_id: c.id,
                            name: c.name,
                            content: body.clone(),
                            is_error: false,
                        });
                    }
                } else {
                    out.push(m);
                }
            }
            out
        })
    }

    /// Every call in `kept` has its result there, and every result its call.
    fn paired(kept: &[Arc<Message>]) -> bool {
        let mut open: Vec<&CallId> = Vec::new();
        for m in kept {
            match &**m {
                Message::ToolResult { call_id, .. } => {
                    match open.iter().position(|c| *c == call_id) {
                        Some(at) => {
                            open.remove(at);
                        }
                        None => return false,
                    }
                }
                other => {
                    if !open.is_empty() {
                        return false;
                    }
                    open.extend(other.tool_calls().iter().map(|c| &c.id));
                }
            }
        }
        open.is_empty()
    }

    proptest! {
        #[test]
        fn a_cut_keeps_groups_whole_keeps_the_tail_and_fits_when_it_can(
            messages in conversation(),
            target in 0u64..3000,
            reserve in 0u64..200,
            min_tail in 0usize..10,
        ) {
            let messages: Vec<Arc<Message>> = messages.into_iter().map(Arc::new).collect();
            let tokens: Vec<u32> = messages.iter().map(|m| tokens::count_message(m)).collect();
            let total: u64 = tokens.iter().map(|&t| u64::from(t)).sum();
            match prune_to_budget(&messages, &tokens, total, target, reserve, min_tail) {
                None => {
                    // Nothing needed to go, or no cut was allowed.
                    let allowed = (1..=messages.len().saturating_sub(min_tail)).any(|d| {
                        messages.get(d).is_none_or(|m| !matches!(**m, Message::ToolResult { .. }))
                    });
                    prop_assert!(total + reserve <= target || !allowed);
                }
                Some(cut) => {
                    let kept = &messages[cut.drop..];
                    prop_assert!(kept.len() >= min_tail.min(messages.len()));
                    let starts_with_result =
                        matches!(kept.first().map(|m| &**m), Some(Message::ToolResult { .. }));
                    prop_assert!(!starts_with_result, "the kept part starts with a tool result");
                    prop_assert!(paired(kept), "a call group was split");
                    let dropped: u64 = tokens[..cut.drop].iter().map(|&t| u64::from(t)).sum();
                    prop_assert_eq!(dropped, cut.tokens, "token totals equal the sum");
                    prop_assert_eq!(cut.fits, total - dropped + reserve <= target);
                    if cut.fits {
                        // It dropped as little as possible: one boundary less would not fit.
                        let shallower = (1..cut.drop).rev().find(|&d| {
                            !matches!(*messages[d], Message::ToolResult { .. })
                        });
                        if let Some(d) = shallower {
                            let less: u64 = tokens[..d].iter().map(|&t| u64::from(t)).sum();
                            prop_assert!(total - less + reserve > target);
                        }
                    }
                }
            }
        }
    }
}
