//! What rewind costs, as a run feels it: the snapshot each turn takes of a 10,000-file
//! workspace in which the turn changed a few files (three edited, one made, one removed),
//! what each stores, and a rewind that brings back 100 changed files. Also the first
//! snapshot of the workspace (it keeps a copy of every file) and a process's first snapshot
//! after another's (it reads the tree again, by metadata).
//!
//!     cargo bench --bench rewind
//!
//! Targets: a turn's snapshot at most 5 ms (median), storage in proportion to what changed,
//! a rewind of 100 files at most 100 ms. Results are printed and written to
//! target/ryvos-bench/rewind.txt.

mod support;

use ryvos::config::RewindConfig;
use ryvos::WorkspaceSnapshots;
use std::path::Path;
use std::time::Instant;
use support::{machine, percentile, publish, verdict};

const FILES: usize = 10_000;
const TURNS: usize = 200;
const REWINDS: usize = 20;

/// Bytes under `dir`.
fn size_of(dir: &Path) -> u64 {
    let mut total = 0;
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let meta = entry.metadata().unwrap();
            match meta.is_dir() {
                true => dirs.push(entry.path()),
                false => total += meta.len(),
            }
        }
    }
    total
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

fn main() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let file = |n: usize| root.join(format!("d{}/f{n}.txt", n / 100));
    for n in 0..FILES {
        std::fs::create_dir_all(file(n).parent().unwrap()).unwrap();
        std::fs::write(file(n), format!("file {n}\n{}\n", "x".repeat(900))).unwrap();
    }
    let snapshots = WorkspaceSnapshots::new(home.path(), &RewindConfig::default()).unwrap();
    let objects = home.path().join("snapshots");
    let started = Instant::now();
    let first = snapshots.take(&root);
    let first_ms = ms(started);
    assert!(first.unkept.is_none(), "{:?}", first.unkept);
    let stored_first = size_of(&objects);

    // Turns: three files edited, one made, one removed, then the turn's snapshot.
    let mut times = Vec::with_capacity(TURNS);
    let mut changed_bytes = 0u64;
    let before = size_of(&objects);
    for turn in 0..TURNS {
        for k in 0..3 {
            let content = format!("turn {turn} edit {k}\n{}\n", "y".repeat(900));
            changed_bytes += content.len() as u64;
            std::fs::write(file((turn * 37 + k * 1013) % FILES), content).unwrap();
        }
        let made = root.join(format!("d{}/new{turn}.txt", turn % 100));
        let content = format!("made in turn {turn}\n");
        changed_bytes += content.len() as u64;
        std::fs::write(made, content).unwrap();
        if turn > 0 {
            std::fs::remove_file(root.join(format!("d{}/new{}.txt", (turn - 1) % 100, turn - 1)))
                .unwrap();
        }
        let started = Instant::now();
        let mark = snapshots.take(&root);
        times.push(ms(started));
        assert!(mark.unkept.is_none());
    }
    let stored_turns = size_of(&objects) - before;
    times.sort_by(f64::total_cmp);

    // Rewinds: 100 files changed since the point, then brought back.
    let mut rewinds = Vec::with_capacity(REWINDS);
    for round in 0..REWINDS {
        let point = snapshots.take(&root);
        for k in 0..100 {
            std::fs::write(
                file((round * 101 + k * 97) % FILES),
                format!("round {round}\n"),
            )
            .unwrap();
        }
        let started = Instant::now();
        let (_, restored) = snapshots.restore(&point).unwrap();
        rewinds.push(ms(started));
        assert_eq!(restored.written, 100);
    }
    rewinds.sort_by(f64::total_cmp);

    // Another process's first snapshot: the tree read again, files by their metadata.
    let later = WorkspaceSnapshots::new(home.path(), &RewindConfig::default()).unwrap();
    let started = Instant::now();
    later.take(&root);
    let later_ms = ms(started);

    let turn_median = percentile(&times, 0.5);
    let rewind_median = percentile(&rewinds, 0.5);
    let per_turn = stored_turns / TURNS as u64;
    let report = format!(
        "rewind: a {FILES}-file workspace, {}\n\n\
         | measure | value | target |\n|---|---|---|\n\
         | a turn's snapshot (3 edited, 1 made, 1 removed), median of {TURNS} | {turn_median:.3} ms | at most 5 ms: {} |\n\
         | a turn's snapshot, p90 / p99 | {:.3} / {:.3} ms | |\n\
         | stored per turn | {per_turn} bytes ({} bytes of files changed) | in proportion to what changed |\n\
         | a rewind of 100 changed files, median of {REWINDS} | {rewind_median:.2} ms | at most 100 ms: {} |\n\
         | a rewind of 100 files, max | {:.2} ms | |\n\
         | the workspace's first snapshot (every file kept) | {first_ms:.1} ms, {stored_first} bytes | |\n\
         | another process's first snapshot (by metadata) | {later_ms:.1} ms | |\n",
        machine(),
        verdict(turn_median <= 5.0),
        percentile(&times, 0.9),
        percentile(&times, 0.99),
        changed_bytes / TURNS as u64,
        verdict(rewind_median <= 100.0),
        rewinds.last().copied().unwrap_or_default(),
    );
    publish("rewind.txt", &report);
}
