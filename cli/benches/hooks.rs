//! What hooks cost a turn, as a run feels it: the runtime's own work per turn (answer received
//! to next request left, the tool's time excluded: see `turn_overhead`) with no hooks, with a
//! no-op command hook (`true`) at `PreToolUse`, and with one at `PreToolUse` and one at
//! `PostToolUse`. A hook command starts in the run's sandbox as a model command does, so its
//! cost is a confined `bash` start; per event it is the difference from no hooks, divided by
//! the events of a turn. The target: at most 15 ms per event (median), and nothing without
//! hooks.
//!
//!     cargo bench --bench hooks
//!
//! Needs bubblewrap. Results are printed and written to target/ryvos-bench/hooks.txt.

mod support;

use ryvos::config::{HookSpec, HooksConfig};
use ryvos::SafetyTier;
use ryvos_protocol::hook::HookEvent;
use support::{machine, measure_on, publish, Setup, SESSIONS, TURNS_PER_RUN};

/// Rounds of the three figures, interleaved, so that a slow moment of the machine does not
/// fall on one figure alone.
const ROUNDS: usize = 3;

fn no_op_at(events: &[HookEvent]) -> HooksConfig {
    let no_op = HookSpec {
        command: "true".into(),
        ..HookSpec::default()
    };
    events.iter().map(|e| (*e, vec![no_op.clone()])).collect()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let measure = |hooks: Option<&HooksConfig>| {
        let setup = Setup {
            hooks,
            ..Setup::default()
        };
        rt.block_on(measure_on(setup, 20, "noop", SafetyTier::T0))
    };
    // A discarded pass first, so that no figure carries the process's warm-up.
    measure(None);
    let pre = no_op_at(&[HookEvent::PreToolUse]);
    let both = no_op_at(&[HookEvent::PreToolUse, HookEvent::PostToolUse]);
    let mut report = format!(
        "Ryvos hooks: per-turn runtime overhead (answer received -> next request left, tool \
         time excluded)\nmachine: {}\n{SESSIONS} sessions x {} turns per figure; a no-op hook \
         is `true`, run by `sh -c` in the default sandbox; {ROUNDS} rounds, interleaved\n\n",
        machine(),
        TURNS_PER_RUN - 1
    );
    let mut per_event = Vec::new();
    for round in 1..=ROUNDS {
        let none = measure(None);
        let one = measure(Some(&pre));
        let two = measure(Some(&both));
        for (label, f) in [
            ("no hooks                        ", &none),
            ("no-op PreToolUse                ", &one),
            ("no-op PreToolUse + PostToolUse  ", &two),
        ] {
            report.push_str(&format!(
                "round {round}, {label}: p50 {:8.2} ms  p99 {:8.2} ms  mean {:8.2} ms  ({} turns)\n",
                f.p50 / 1000.0,
                f.p99 / 1000.0,
                f.mean / 1000.0,
                f.samples
            ));
        }
        let (one_event, two_events) =
            ((one.p50 - none.p50) / 1000.0, (two.p50 - none.p50) / 2000.0);
        report.push_str(&format!(
            "round {round}: per event (p50 over no hooks) {one_event:.2} ms with one hook, \
             {two_events:.2} ms with two; no hooks {:.1} us per turn\n\n",
            none.p50
        ));
        per_event.extend([one_event, two_events]);
    }
    per_event.sort_by(f64::total_cmp);
    let median = (per_event[per_event.len() / 2 - 1] + per_event[per_event.len() / 2]) / 2.0;
    report.push_str(&format!(
        "per event, the median of the rounds' figures: {median:.2} ms (target <= 15 ms -> {})\n",
        if median <= 15.0 { "met" } else { "MISSED" }
    ));
    publish("hooks.txt", &report);
}
