//! `ryvos rewind` and `ryvos fork`: a session taken back to a point, files and all, or a new
//! one started from it; through the daemon when one answers, else on this home's store.

use crate::out::outln;
use crate::reading::{shown, through_daemon_or_here};
use ryvos::config::Config;
use ryvos::protocol::{Fork, ForkParams, ForkResult, Rewind, RewindParams, RewindResult};
use std::path::Path;

/// Rewinds a session and says what changed (as JSON with `json`); the exit code: 1 when it
/// is refused (a run in flight, a point that cannot be gone back to), saying why.
pub async fn rewind(params: RewindParams, socket: &Path, config: &Config, json: bool) -> u8 {
    through_daemon_or_here::<Rewind>(
        socket,
        config,
        params,
        shown(json, rewound),
        async |runtime, params| runtime.rewind(params).await,
    )
    .await
}

/// Forks a session and names the new one (as JSON with `json`).
pub async fn fork(params: ForkParams, socket: &Path, config: &Config, json: bool) -> u8 {
    through_daemon_or_here::<Fork>(
        socket,
        config,
        params,
        shown(json, forked),
        async |runtime, params| runtime.fork(params).await,
    )
    .await
}

fn rewound(r: &RewindResult) {
    outln!(
        "session {} went back to {}: {} messages in its window; {} written and {} removed in {}",
        r.session_id,
        r.to,
        r.window_messages,
        files(r.files_written),
        files(r.files_removed),
        r.workspace
    );
    if !r.not_undone.is_empty() {
        outln!("not undone (their effects are outside the workspace's files):");
        for call in &r.not_undone {
            outln!("  {call}");
        }
    }
    outln!(
        "`ryvos rewind {} --undo` goes back to before this rewind",
        r.session_id
    );
}

fn forked(f: &ForkResult) {
    outln!(
        "session {} is a fork of {} at {}, working in {} ({} copied); `ryvos run --session {} \
         --workspace {} …` goes on with it",
        f.session_id,
        f.forked_from,
        f.at,
        f.workspace,
        files(f.files),
        f.session_id,
        f.workspace
    );
}

fn files(n: u64) -> String {
    match n {
        1 => "1 path".into(),
        n => format!("{n} paths"),
    }
}
