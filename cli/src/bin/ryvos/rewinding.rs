//! `ryvos rewind` and `ryvos fork`: a session taken back to a point, files and all, or a new
//! one started from it; through the daemon when one answers, else on this home's store.

use crate::cli::Point;
use crate::exit::EXIT_USAGE;
use crate::out::outln;
use crate::reading::{shown, through_daemon_or_here};
use ryvos::config::Config;
use ryvos::protocol::{Fork, ForkParams, ForkResult, Rewind, RewindParams, RewindResult};
use std::path::{Path, PathBuf};

/// Rewinds a session to `point` (or `undo`es its last rewind) and says what changed (as JSON
/// with `json`); the exit code: 1 when it is refused (a run in flight, a point that cannot be
/// gone back to), saying why.
pub async fn rewind(
    point: Point,
    undo: bool,
    (socket, config): (&Path, &Config),
    json: bool,
) -> u8 {
    let params = RewindParams {
        session: point.session,
        turn: point.turn,
        run: point.run,
        undo,
    };
    through_daemon_or_here::<Rewind>(
        socket,
        config,
        params,
        shown(json, rewound),
        async |runtime, params| runtime.rewind(params).await,
    )
    .await
}

/// Forks a session at `point`, its files copied to `workspace` (or beside the original), and
/// names the new one (as JSON with `json`).
pub async fn fork(
    point: Point,
    workspace: Option<PathBuf>,
    (socket, config): (&Path, &Config),
    json: bool,
) -> u8 {
    let workspace = match workspace.map(|w| std::path::absolute(&w)).transpose() {
        Ok(w) => w.map(|w| w.display().to_string()),
        Err(e) => {
            eprintln!("ryvos: --workspace: {e}");
            return EXIT_USAGE;
        }
    };
    let params = ForkParams {
        session: point.session,
        turn: point.turn,
        run: point.run,
        workspace,
    };
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
