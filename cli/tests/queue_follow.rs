//! `ryvos follow` on a queued run, through the daemon running it and through another daemon
//! sharing its PostgreSQL database: the real binaries. Either way every turn is told once, in
//! order, and nothing comes after the run's end.

mod common;

use common::backend::Backend;
use common::home::{Follower, Home, WAIT};
use ryvos_testkit::{postgres, Reply, ScriptedModelServer};
use serde_json::Value;
use std::time::Duration;

/// Tool turns before the answer: the run has this many turns and one more.
const TOOL_TURNS: usize = 3;

/// Every answer a little slow, so that the runs are followed while they go on.
fn model() -> ryvos_testkit::Router {
    std::sync::Arc::new(|request: &Value| {
        let pause = Duration::from_millis(300);
        let answered = common::answers_since_prompt(request);
        if answered >= TOOL_TURNS {
            return Some(Reply::text(&["counted"]).delay(pause));
        }
        let id = format!("c{answered}");
        let args = serde_json::json!({ "path": format!("tally{answered}.txt") }).to_string();
        Some(Reply::tool_calls(&[(&id, "read", &args)]).delay(pause))
    })
}

/// The events a follower printed, once its client has ended well.
async fn events(follower: Follower) -> Vec<Value> {
    let ended = tokio::time::timeout(WAIT, follower.rest())
        .await
        .expect("follow ends with its run");
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    ended.events
}

/// The turns of the `CheckpointSaved` events among `events`, in their order.
fn turns(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e["type"] == "CheckpointSaved")
        .map(|e| e["turn"].as_u64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_queued_run_is_followed_turn_by_turn_through_either_daemon() {
    if !Backend::Postgres.available() {
        return;
    }
    let url = postgres::shared().unwrap().database().unwrap();
    let server = ScriptedModelServer::start_routed([], Some(model())).await;
    let homes: Vec<Home> = (0..2)
        .map(|_| Home::new(&server, "").sharing(&url, 3))
        .collect();
    let mut daemons = Vec::new();
    for home in &homes {
        daemons.push(home.daemon().await);
    }
    let workspace = homes[0].workspace.path().to_str().unwrap().to_owned();
    for n in 0..TOOL_TURNS {
        let tally = homes[0].workspace.path().join(format!("tally{n}.txt"));
        std::fs::write(tally, format!("{n}\n")).unwrap();
    }
    for round in 0..2 {
        let (code, out, err) = homes[round]
            .ryvos(&["submit", "-q", "--workspace", &workspace, "count"])
            .await;
        assert_eq!(code, 0, "{err}");
        let id = out.trim().to_owned();
        let followers: Vec<Follower> = homes
            .iter()
            .map(|home| home.follow(&["follow", "--json", &id]))
            .collect();
        let (code, out, err) = homes[0].ryvos(&["runs", "--json"]).await;
        assert_eq!(code, 0, "{err}");
        let runs: Vec<Value> = serde_json::from_str(out.trim()).unwrap();
        assert!(runs.iter().any(|r| r["id"] == id.as_str()), "{runs:?}");
        for (n, follower) in followers.into_iter().enumerate() {
            let events = events(follower).await;
            let all: Vec<u64> = (1..=TOOL_TURNS as u64 + 1).collect();
            assert_eq!(turns(&events), all, "round {round}, daemon {n}: {events:?}");
            if let Some(end) = events.iter().position(|e| e["type"] == "RunComplete") {
                assert_eq!(end, events.len() - 1, "daemon {n}: {events:?}");
            }
        }
    }
    for (home, daemon) in homes.iter().zip(daemons) {
        home.shutdown(daemon).await;
    }
}
