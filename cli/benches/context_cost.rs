//! Per-turn context cost at a 20-message and a 2,000-message history: counting the turn's new
//! messages, assembling the request's conversation (a snapshot), and the pruning decision.
//! None of it may grow with the history, so the two figures should be close. Then what a
//! compaction adds once (not per turn): finding the exact facts of the part it drops.
//!
//!     cargo bench --bench context_cost
//!
//! Results are printed and written to target/ryvos-bench/context_cost.txt.

use ryvos::protocol::ids::CallId;
use ryvos::protocol::message::{Message, ToolCall};
use ryvos::testing::prune_to_budget;
use ryvos::testing::History;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Turns measured per figure.
const TURNS: usize = 5_000;
/// A budget the histories fit in: the decision is measured, not a pruning.
const BUDGET: u64 = 10_000_000;

fn turn_messages(i: usize) -> [Message; 2] {
    let call = ToolCall {
        id: CallId::new(format!("c{i}")),
        name: "read".into(),
        arguments: format!(r#"{{"path": "src/file{i}.rs"}}"#),
    };
    [
        Message::Assistant {
            content: String::new(),
            tool_calls: vec![call.clone()],
            reasoning: Vec::new(),
        },
        Message::ToolResult {
            call_id: call.id,
            name: call.name,
            content: format!("fn f{i}() {{ /* the file's text */ }}\n").repeat(8),
            is_error: false,
        },
    ]
}

/// The p50 and p99 of one turn's context work on a history of `size` messages.
fn measure(size: usize) -> (Duration, Duration) {
    let mut history = History::default();
    history.push(Message::user("work through the files"));
    for i in 0..size / 2 {
        for m in turn_messages(i) {
            history.push(m);
        }
    }
    let mut samples = Vec::with_capacity(TURNS);
    for i in 0..TURNS {
        let [call, result] = turn_messages(size + i);
        let start = Instant::now();
        history.push(call);
        history.push(result);
        let request = history.snapshot();
        let total = history.total_tokens();
        if total >= BUDGET {
            black_box(prune_to_budget(
                &request,
                history.token_counts(),
                total,
                BUDGET / 2,
                0,
                6,
            ));
        }
        black_box(request);
        samples.push(start.elapsed());
        // Keep the history at its size: what this turn added is handed off and left behind.
        black_box(history.take_unsubmitted());
        if history.len() > size + 64 {
            history.compact(history.len() - size, None);
            black_box(history.take_compaction());
        }
    }
    samples.sort();
    (samples[TURNS / 2], samples[TURNS * 99 / 100])
}

/// How many facts a compaction of `size` messages finds, and the p50 time to find them.
fn facts_per_compaction(size: usize) -> (usize, Duration) {
    let part: Vec<Arc<Message>> = (0..size / 2)
        .flat_map(turn_messages)
        .map(Arc::new)
        .collect();
    let mut samples = Vec::with_capacity(100);
    let mut found = 0;
    for _ in 0..100 {
        let start = Instant::now();
        found = black_box(ryvos::testing::extract_facts(black_box(&part)));
        samples.push(start.elapsed());
    }
    samples.sort();
    (found, samples[50])
}

fn main() {
    ryvos::testing::warm_up_tokenizer();
    // Let the tokenizer load before anything is timed.
    ryvos::testing::count_text("warm up");
    let mut report = String::from(
        "Ryvos per-turn context cost (count the turn's messages + snapshot the conversation + \
         pruning decision)\n",
    );
    let (small_p50, small_p99) = measure(20);
    let (large_p50, large_p99) = measure(2_000);
    for (size, p50, p99) in [(20, small_p50, small_p99), (2_000, large_p50, large_p99)] {
        report.push_str(&format!(
            "history {size:>5}: p50 {:>8.1} us  p99 {:>8.1} us  ({TURNS} turns)\n",
            p50.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6
        ));
    }
    let (facts, facts_p50) = facts_per_compaction(200);
    report.push_str(&format!(
        "facts of a 200-message part (once per compaction): p50 {:>8.1} us  ({facts} found)\n",
        facts_p50.as_secs_f64() * 1e6
    ));
    let ratio = large_p50.as_secs_f64() / small_p50.as_secs_f64();
    let verdict = if ratio <= 1.5 { "met" } else { "MISSED" };
    report.push_str(&format!(
        "ratio 2,000 / 20 (p50): {ratio:.2}  (target <= 1.5: {verdict})\n"
    ));
    print!("{report}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ryvos-bench");
    if std::fs::create_dir_all(&dir).is_ok() {
        if let Err(e) = std::fs::write(dir.join("context_cost.txt"), &report) {
            eprintln!("could not write the report: {e}");
        }
    }
}
