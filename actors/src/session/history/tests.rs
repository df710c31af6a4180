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
                    reasoning: Vec::new(),
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
                    reasoning: Vec::new(),
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
                    reasoning: Vec::new(),
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
    assert!(matches!(&*view[0], Message::System { content } if content.contains("the first four")));
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
        ..Compaction::default()
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

#[test]
fn the_servers_count_measures_what_it_was_sent_and_bounds_measure_the_rest() {
    let mut h = History::default();
    h.push(Message::user("x".repeat(4000)));
    let asked = h.mark();
    h.push(Message::user("y".repeat(100)));
    assert_eq!(h.measured_tokens(50), None);
    h.measure(asked, 1200, 50);
    let after = u64::from(h.token_counts()[1]);
    assert_eq!(h.measured_tokens(50), Some(1200 + after));
    // A count too small for what was sent is not a count of it.
    h.measure(h.mark(), 12, 50);
    assert_eq!(h.measured_tokens(50), Some(1200 + after));
}

#[test]
fn a_count_of_a_window_that_lost_messages_since_is_not_kept() {
    let mut h = History::default();
    for i in 0..4 {
        h.push(Message::user(format!("message {i}")));
    }
    let asked = h.mark();
    h.compact(2, None);
    h.measure(asked, 40, 0);
    assert_eq!(h.measured_tokens(0), None);
    h.measure(h.mark(), 40, 0);
    assert_eq!(h.measured_tokens(0), Some(40));
    h.compact(1, None);
    assert_eq!(h.measured_tokens(0), None, "a compaction forgets the count");
}

#[test]
fn a_count_kept_on_the_record_measures_the_reloaded_window() {
    let mut h = History::default();
    for i in 0..6 {
        h.push(Message::user(format!("message {i} {}", "z".repeat(400))));
    }
    let asked = h.mark();
    h.push(Message::user("after the request"));
    h.measure(asked, 700, 30);
    let kept = h.window_measure().expect("a count to keep");
    assert_eq!(kept.before_seq, 6, "the request carried seqs 0..6");
    let stored = h.take_unsubmitted();
    let mut reloaded = History::load(stored, 7, None, &[]);
    assert_eq!(reloaded.measured_tokens(30), None);
    reloaded.restore_measure(&kept);
    assert_eq!(reloaded.measured_tokens(30), h.measured_tokens(30));
    // A system prompt 20 tokens longer now adds them; a shorter one takes nothing off.
    assert_eq!(
        reloaded.measured_tokens(50),
        h.measured_tokens(30).map(|t| t + 20)
    );
    assert_eq!(reloaded.measured_tokens(10), h.measured_tokens(30));
    // A count of another window (before a compaction) is not taken up.
    let mut compacted = History::load(reloaded.take_unsubmitted(), 7, None, &[]);
    compacted.compact(2, None);
    compacted.restore_measure(&kept);
    assert_eq!(compacted.measured_tokens(30), None);
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
                        reasoning: Vec::new(),
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
