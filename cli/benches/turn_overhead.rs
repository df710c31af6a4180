//! The runtime's own work per turn, at a 20-message and a 2,000-message history.
//!
//! The whole loop runs with durable checkpoints (an fsync per commit) against an in-process
//! provider that answers at once. A turn's overhead is the time from the model's answer being
//! fully received to the next request leaving, minus the time spent inside the tool: actor
//! messages, token counting, events, validation, the hand-off of the turn to the store, and
//! building the next request. Per-turn work must not grow with the history, so the two figures
//! should be close.
//!
//!     cargo bench --bench turn_overhead
//!
//! Results are printed and written to target/ryvos-bench/turn_overhead.txt.

mod support;

use ryvos::SafetyTier;
use support::{machine, measure, publish, SESSIONS, TURNS_PER_RUN};

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut report = format!(
        "Ryvos per-turn runtime overhead (answer received -> next request left, tool time excluded)\n\
         machine: {}\ndurable checkpoints (fsync per commit); {SESSIONS} sessions x {} turns per figure\n\n",
        machine(),
        TURNS_PER_RUN - 1
    );
    // A discarded pass first, so that neither figure carries the process's warm-up.
    rt.block_on(measure(20, "noop", SafetyTier::T0));
    let small = rt.block_on(measure(20, "noop", SafetyTier::T0));
    let large = rt.block_on(measure(2000, "noop", SafetyTier::T0));
    let effects = rt.block_on(measure(20, "touch", SafetyTier::T2));
    for (label, f) in [
        ("history    20, read-only tool   ", &small),
        ("history 2,000, read-only tool   ", &large),
        ("history    20, side-effect tool ", &effects),
    ] {
        report.push_str(&format!(
            "{label}: p50 {:8.1} us  p99 {:8.1} us  mean {:8.1} us  ({} turns)\n",
            f.p50, f.p99, f.mean, f.samples
        ));
    }
    report.push_str(&format!(
        "\nratio 2,000 / 20 (p50): {:.2}  (target <= 1.5)\n\
         target p50 at 20 messages: <= 200 us -> {}\n\
         A tool with side effects waits until its turn is durable, so its figure includes one fsync.\n",
        large.p50 / small.p50,
        if small.p50 <= 200.0 { "met" } else { "MISSED" }
    ));
    publish("turn_overhead.txt", &report);
}
