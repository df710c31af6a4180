//! `ryvos run --record` and `provider = "replay"`, through the real binary.

mod common;

use common::cli::{self, json_lines as events};
use ryvos_testkit::{Reply, ScriptedModelServer};
use std::path::Path;
use tokio::process::Command;

/// `ryvos --config CONFIG run FLAGS --workspace WORKSPACE PROMPT`, with `home` as RYVOS_HOME.
async fn run(
    home: &Path,
    config: &Path,
    flags: &[&str],
    workspace: &Path,
    prompt: &str,
) -> (i32, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ryvos"));
    command
        .env("RYVOS_HOME", home)
        .arg("--config")
        .arg(config)
        .arg("run")
        .args(flags)
        .arg("--workspace")
        .arg(workspace)
        .arg(prompt);
    cli::output(&mut command).await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_shipped_tour_replays_a_full_run_offline() {
    let home = tempfile::tempdir().unwrap();
    let tour = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tour");
    let config = tour.join("config.toml");
    let workspace = tour.join("workspace");
    let (code, stdout, stderr) = run(
        home.path(),
        &config,
        &["--json"],
        &workspace,
        "What changed in the latest release?",
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let events = events(&stdout);
    let count = |t: &str| events.iter().filter(|e| e["type"] == t).count();
    assert_eq!(count("ToolStart"), 2);
    assert!(count("TextDelta") >= 4 && count("CheckpointSaved") == 3);
    let last = events.last().unwrap();
    assert_eq!(last["status"], "completed");
    assert!(last["output"].as_str().unwrap().contains("0.2"));
    let read = events
        .iter()
        .find(|e| e["type"] == "ToolEnd" && e["name"] == "read")
        .unwrap();
    assert!(
        read["output"]
            .as_str()
            .unwrap()
            .contains("faster checkpoints"),
        "the tools ran for real"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recorded_run_replays_without_the_model_server() {
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "glob", r#"{"pattern": "*.txt"}"#)]),
        Reply::text(&["There is ", "one file."]),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("a.txt"), "a").unwrap();
    let live = home.path().join("live.toml");
    std::fs::write(
        &live,
        format!(
            "[model]\nbase_url = \"{}\"\napi_key = \"\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    let recording = home.path().join("run.jsonl");
    let ws = workspace.path();
    let (code, recorded, stderr) = run(
        home.path(),
        &live,
        &["--record", recording.to_str().unwrap()],
        ws,
        "count the files",
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&recording).unwrap().lines().count(),
        2
    );
    let requests_before = server.requests().len();

    let replay = home.path().join("replay.toml");
    std::fs::write(
        &replay,
        "[model]\nprovider = \"replay\"\nreplay_file = \"run.jsonl\"\n",
    )
    .unwrap();
    let (code, replayed, stderr) = run(home.path(), &replay, &[], ws, "count the files").await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(replayed, recorded);
    assert_eq!(replayed.trim(), "There is one file.");
    assert_eq!(
        server.requests().len(),
        requests_before,
        "the replay asked no server"
    );

    // A recording that runs out mid-run fails the run clearly instead of hanging.
    let first_only = std::fs::read_to_string(&recording)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_owned();
    std::fs::write(&recording, first_only + "\n").unwrap();
    let (code, _, stderr) = run(home.path(), &replay, &[], ws, "again").await;
    assert_ne!(code, 0);
    assert!(
        stderr.contains("holds 1 answer(s); request 2 of this run has none"),
        "{stderr}"
    );
}
