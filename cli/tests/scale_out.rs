//! Many daemons on one PostgreSQL database: the real `ryvosd` and `ryvos` binaries, three
//! homes on this machine sharing a database the test starts, a scripted model server.
//!
//! Runs submitted to the queue spread across the daemons and all complete; a daemon killed
//! with SIGKILL mid-run has its runs taken over by the others once its leases lapse, and
//! afterwards every call in every session has exactly one result and no tool ran twice.

mod common;

use common::backend::Backend;
use common::home::{Home, WAIT};
use ryvos_testkit::{postgres, Reply, ScriptedModelServer};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The trail every tool call appends its call id to, in the shared workspace.
const TRAIL: &str = "trail.txt";

/// After each prompt: one turn that appends the call's id to the trail, then an answer.
/// `pause_ms` slows every answer, so that runs are in flight when a daemon is killed.
fn model(pause_ms: Arc<AtomicU64>) -> ryvos_testkit::Router {
    let next_call = Arc::new(AtomicU64::new(1));
    Arc::new(move |request: &Value| {
        let pause = Duration::from_millis(pause_ms.load(Ordering::Relaxed));
        if common::answers_since_prompt(request) >= 1 {
            return Some(Reply::text(&["done"]).delay(pause));
        }
        let id = format!("c{}", next_call.fetch_add(1, Ordering::Relaxed));
        let args = serde_json::json!({ "command": format!("echo {id} >> {TRAIL}") }).to_string();
        Some(Reply::tool_calls(&[(&id, "bash", &args)]).delay(pause))
    })
}

/// `n` homes sharing the database at `url` (leases of 3 s), each with its daemon started.
/// Each daemon runs at most 4 runs at once, so that a batch larger than two daemons hold is
/// spread over every one of them however fast some claim (on a loaded machine two daemons
/// could otherwise take a whole batch, and a test waiting for the third would wait in vain).
async fn cluster(
    server: &ScriptedModelServer,
    url: &str,
    n: usize,
) -> (Vec<Home>, Vec<tokio::process::Child>) {
    let homes: Vec<Home> = (0..n)
        .map(|_| Home::new(server, "[daemon]\nmax_in_flight_runs = 4\n").sharing(url, 3))
        .collect();
    let mut daemons = Vec::new();
    for home in &homes {
        daemons.push(home.daemon().await);
    }
    (homes, daemons)
}

/// Submits `n` runs through the daemons in turn; their ids.
async fn submit(homes: &[Home], workspace: &str, n: usize, tag: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let home = &homes[i % homes.len()];
        let prompt = format!("{tag} {i}");
        let (code, out, err) = home
            .ryvos(&["submit", "-q", "--workspace", workspace, &prompt])
            .await;
        assert_eq!(code, 0, "{err}");
        ids.push(out.trim().to_owned());
    }
    ids
}

/// Waits for every run through `home`, asserting each completed.
async fn wait_all(home: &Home, ids: &[String]) {
    let waits = ids.iter().map(|id| async move {
        let (code, out, err) = home.ryvos(&["wait", "--json", id]).await;
        (id, code, out, err)
    });
    for (id, code, out, err) in futures_util::future::join_all(waits).await {
        assert_eq!(code, 0, "{id}: {out} {err}");
        let outcome: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(outcome["status"], "completed", "{id}: {outcome}");
    }
}

/// The queue as `ryvos runs --json` lists it.
async fn runs(home: &Home) -> Vec<Value> {
    let (code, out, err) = home.ryvos(&["runs", "--json", "--limit", "1000"]).await;
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(out.trim()).unwrap()
}

/// Waits until some run of the queue is running, on any daemon.
async fn until_one_runs(home: &Home) {
    tokio::time::timeout(WAIT, async {
        while !runs(home).await.iter().any(|r| r["state"] == "running") {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("some runs start");
}

/// The daemon id `ryvos status` gives.
async fn daemon_id(home: &Home) -> String {
    let (code, out, err) = home.ryvos(&["status", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let status: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(status["store"], "postgres");
    status["daemon_id"].as_str().unwrap().to_owned()
}

/// Every call of the session has exactly one result, every result its call, and the prompt
/// is stored once.
async fn assert_paired(home: &Home, session: &str) {
    let (code, out, err) = home.ryvos(&["history", "--json", session]).await;
    assert_eq!(code, 0, "{err}");
    let history: Value = serde_json::from_str(out.trim()).unwrap();
    let mut calls: HashMap<String, usize> = HashMap::new();
    let mut seqs = HashSet::new();
    let prompts = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["message"]["role"] == "user")
        .count();
    assert_eq!(prompts, 1, "{session}: {}", history["messages"]);
    for stored in history["messages"].as_array().unwrap() {
        assert!(
            seqs.insert(stored["seq"].as_u64().unwrap()),
            "a seq stored twice in {session}"
        );
        let message = &stored["message"];
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            calls
                .entry(call["id"].as_str().unwrap().to_owned())
                .or_default();
        }
        if let Some(id) = message["call_id"].as_str() {
            *calls
                .get_mut(id)
                .unwrap_or_else(|| panic!("a result without its call in {session}")) += 1;
        }
    }
    for (id, results) in calls {
        assert_eq!(
            results, 1,
            "call {id} of {session} has {results} results: {}",
            history["messages"]
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn queued_runs_spread_over_three_daemons_and_a_killed_daemons_runs_are_taken_over() {
    if !Backend::Postgres.available() {
        return;
    }
    let url = postgres::shared().unwrap().database().unwrap();
    let pause_ms = Arc::new(AtomicU64::new(20));
    let server = ScriptedModelServer::start_routed([], Some(model(pause_ms.clone()))).await;
    let (homes, mut daemons) = cluster(&server, &url, 3).await;
    let workspace = tempfile::tempdir().unwrap();
    let shared_dir = workspace.path().to_str().unwrap();
    let mut ids = Vec::new();
    for home in &homes {
        ids.push(daemon_id(home).await);
    }
    // A run that could not start is refused when it is submitted, not when it is claimed.
    let mut bad = homes[0].command(env!("CARGO_BIN_EXE_ryvos"));
    bad.args(["submit", "--workspace", shared_dir, "traced"])
        .env("TRACEPARENT", "not-a-trace");
    let refused = bad.output().await.unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("W3C"), "{said}");
    assert!(runs(&homes[0]).await.is_empty(), "nothing was queued");

    // Sixty runs, submitted through all three: all complete, and every daemon ran some.
    let first = submit(&homes, shared_dir, 60, "task").await;
    wait_all(&homes[0], &first).await;
    let listed = runs(&homes[1]).await;
    let mut by_owner: HashMap<String, usize> = HashMap::new();
    for run in listed
        .iter()
        .filter(|r| first.contains(&r["id"].as_str().unwrap().to_owned()))
    {
        assert_eq!(run["state"], "finished");
        *by_owner
            .entry(run["owner"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert_eq!(by_owner.values().sum::<usize>(), 60);
    for id in &ids {
        assert!(
            by_owner.get(id).is_some_and(|n| *n > 0),
            "{id} ran none: {by_owner:?}"
        );
    }

    // Twelve more, slower; one daemon is killed while it runs some of them.
    pause_ms.store(1500, Ordering::Relaxed);
    let second = submit(&homes[1..], shared_dir, 12, "slow").await;
    let victim = &ids[2];
    let running_there = tokio::time::timeout(WAIT, async {
        loop {
            let listed = runs(&homes[0]).await;
            let there = listed
                .iter()
                .filter(|r| r["state"] == "running" && r["owner"] == victim.as_str())
                .count();
            if there > 0 {
                return there;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the victim claims some runs");
    let mut victim_daemon = daemons.pop().unwrap();
    victim_daemon.start_kill().unwrap();
    victim_daemon.wait().await.unwrap();
    eprintln!("killed {victim} while it ran {running_there} run(s)");
    wait_all(&homes[0], &second).await;
    let listed = runs(&homes[0]).await;
    let taken_over = listed
        .iter()
        .filter(|r| second.contains(&r["id"].as_str().unwrap().to_owned()))
        .filter(|r| r["attempts"].as_u64().unwrap() > 1)
        .count();
    assert!(taken_over > 0, "some runs were taken over: {listed:?}");

    // Nothing ran twice, nothing was stored twice or left unpaired.
    let trail = std::fs::read_to_string(workspace.path().join(TRAIL)).unwrap();
    let mut seen = HashSet::new();
    for line in trail.lines() {
        assert!(seen.insert(line.to_owned()), "tool call {line} ran twice");
    }
    for run in listed.iter().filter(|r| r["state"] == "finished") {
        assert_paired(&homes[0], run["session_id"].as_str().unwrap()).await;
    }
    server.assert_no_orphans();
    for (home, daemon) in homes.iter().zip(daemons) {
        home.shutdown(daemon).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_in_flight_when_the_database_restarts_go_on_once_it_is_back() {
    if !Backend::Postgres.available() {
        return;
    }
    // A server of its own: the other tests' go on while this one restarts.
    let database = postgres::PostgresServer::start().unwrap();
    let url = database.database().unwrap();
    let pause_ms = Arc::new(AtomicU64::new(400));
    let server = ScriptedModelServer::start_routed([], Some(model(pause_ms.clone()))).await;
    let (homes, daemons) = cluster(&server, &url, 2).await;
    let workspace = tempfile::tempdir().unwrap();
    let shared_dir = workspace.path().to_str().unwrap();
    let ids = submit(&homes, shared_dir, 8, "through a restart").await;
    until_one_runs(&homes[0]).await;

    // Down for longer than a lease: every daemon's heartbeat is stale when it comes back.
    database.down().unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (code, _, err) = homes[0].ryvos(&["runs"]).await;
    assert_ne!(code, 0, "listing runs without the database fails");
    assert!(!err.trim().is_empty());
    database.up().unwrap();

    wait_all(&homes[1], &ids).await;
    let listed = runs(&homes[0]).await;
    assert!(
        listed.iter().any(|r| r["attempts"].as_u64().unwrap() > 1),
        "some runs failed with the database and went on: {listed:?}"
    );
    let trail = std::fs::read_to_string(workspace.path().join(TRAIL)).unwrap();
    let mut seen = HashSet::new();
    for line in trail.lines() {
        assert!(seen.insert(line.to_owned()), "tool call {line} ran twice");
    }
    for run in &listed {
        assert_eq!(run["state"], "finished");
        assert_paired(&homes[0], run["session_id"].as_str().unwrap()).await;
    }
    for (home, daemon) in homes.iter().zip(daemons) {
        home.shutdown(daemon).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_whose_daemons_keep_dying_fails_after_max_attempts() {
    if !Backend::Postgres.available() {
        return;
    }
    let url = postgres::shared().unwrap().database().unwrap();
    let pause_ms = Arc::new(AtomicU64::new(1500));
    let server = ScriptedModelServer::start_routed([], Some(model(pause_ms))).await;
    let homes: Vec<Home> = (0..2)
        .map(|_| Home::new(&server, "").sharing(&url, 3))
        .collect();
    for home in &homes {
        let config = home.path().join("config.toml");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str("max_attempts = 1\n");
        std::fs::write(config, text).unwrap();
    }
    let workspace = tempfile::tempdir().unwrap();
    let shared_dir = workspace.path().to_str().unwrap();

    // Started once, on a daemon that dies with it.
    let mut first = homes[0].daemon().await;
    let ids = submit(&homes[..1], shared_dir, 1, "doomed").await;
    until_one_runs(&homes[0]).await;
    first.start_kill().unwrap();
    first.wait().await.unwrap();

    // The next daemon to claim it would be its second start: it fails instead, saying why.
    let second = homes[1].daemon().await;
    let (code, out, err) = homes[1].ryvos(&["wait", "--json", &ids[0]]).await;
    assert_ne!(code, 0, "{out} {err}");
    let outcome: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(outcome["status"], "failed", "{outcome}");
    let reason = outcome["reason"].as_str().unwrap();
    assert!(reason.contains("max_attempts"), "{reason}");
    let listed = runs(&homes[1]).await;
    assert_eq!(listed[0]["state"], "finished");
    assert_eq!(listed[0]["attempts"], 2);
    homes[1].shutdown(second).await;
}
