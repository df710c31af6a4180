//! Parked runs where daemons share a PostgreSQL store: a queued run that parks is waited
//! through by `ryvos wait` on another daemon, and goes on there when it is continued, the same
//! run, each tool run once.

mod common;

use common::backend::Backend;
use common::budget::{two_appends, PRICED};
use common::home::Home;
use ryvos_testkit::{postgres, ScriptedModelServer};
use serde_json::Value;
use std::process::Stdio;

#[tokio::test(flavor = "multi_thread")]
async fn a_parked_queued_run_is_waited_through_and_goes_on_through_another_daemon() {
    if !Backend::Postgres.available() {
        return;
    }
    let url = postgres::shared().unwrap().database().unwrap();
    let server = ScriptedModelServer::start(two_appends()).await;
    let a = Home::new(&server, PRICED).sharing(&url, 30);
    let b = Home::new(&server, PRICED).sharing(&url, 30);
    let daemon_a = a.daemon().await;
    let daemon_b = b.daemon().await;

    let (code, queued, stderr) = a.ryvos(&["submit", "--quiet", "write", "the", "log"]).await;
    assert_eq!(code, 0, "{stderr}");
    let queued = queued.trim().to_owned();
    let waiting = b
        .command(env!("CARGO_BIN_EXE_ryvos"))
        .args(["wait", &queued])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // Parked: every daemon's status lists it, and the queue holds it as parked.
    let mut parked = Value::Null;
    for _ in 0..300 {
        let (_, status, _) = b.ryvos(&["status", "--json"]).await;
        let status: Value = serde_json::from_str(&status).unwrap_or_default();
        if let Some(run) = status["parked"].as_array().and_then(|p| p.first()) {
            parked = run.clone();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let run_id = parked["run_id"].as_str().expect("the run parks").to_owned();
    assert_eq!(parked["reason"], "budget_run");
    let mut queued_state = Value::Null;
    for _ in 0..100 {
        let (_, runs, _) = a.ryvos(&["runs", "--json", "--state", "parked"]).await;
        queued_state = serde_json::from_str::<Value>(&runs).unwrap_or_default()[0]["state"].clone();
        if queued_state == "parked" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(queued_state, "parked");

    let (code, out, stderr) = b
        .ryvos(&["continue", &run_id, "--budget-cents", "500", "--json"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let events = common::cli::json_lines(&out);
    assert!(events.iter().all(|e| e["run_id"] == run_id.as_str()));
    assert_eq!(events.last().unwrap()["cost_cents"], 210.0);

    let waited = tokio::time::timeout(common::home::WAIT, waiting.wait_with_output())
        .await
        .expect("wait ends once the run does")
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&waited.stdout),
        String::from_utf8_lossy(&waited.stderr),
    );
    assert_eq!(waited.status.code(), Some(0), "{stderr}");
    assert_eq!(stdout.trim(), "Both lines are written.");
    assert!(
        stderr.contains(&format!("run {run_id} parked (budget_run)")),
        "{stderr}"
    );
    let log = std::fs::read_to_string(a.workspace.path().join("log.txt")).unwrap();
    assert_eq!(log, "one\ntwo\n", "each tool ran once");
    // The queued run waited as parked, and is finished with the run's end.
    let mut listed = Value::Null;
    for _ in 0..100 {
        let (_, runs, _) = a.ryvos(&["runs", "--json"]).await;
        listed = serde_json::from_str::<Value>(&runs).unwrap_or_default()[0].clone();
        if listed["state"] == "finished" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(listed["state"], "finished", "{listed}");
    assert_eq!(listed["outcome"]["status"], "completed", "{listed}");
    a.shutdown(daemon_a).await;
    b.shutdown(daemon_b).await;
}
