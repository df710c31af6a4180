//! Watching a run from a second terminal on the default store (redb): `status` lists the run
//! in flight, `follow` shows its events live (by its run id or its session's), `wait` waits
//! for its end; a run that has ended is answered from its record at once.

mod common;

use common::home::Home;
use ryvos_testkit::{Gate, Reply, ScriptedModelServer};

#[tokio::test(flavor = "multi_thread")]
async fn a_second_terminal_follows_and_waits_for_a_daemon_run_on_redb() {
    let gate = Gate::new();
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("g1", "glob", r#"{"pattern": "*"}"#)]),
        Reply::text(&["all ", "done"]).held(&gate),
    ])
    .await;
    let home = Home::new(&server, "");
    let daemon = home.daemon().await;
    let mut running = home.follow(&["run", "--json", "look", "around"]);
    let (session, run) = running
        .until(|e| {
            let ids = (e["session_id"].as_str()?, e["run_id"].as_str()?);
            (e["type"] == "ToolEnd").then(|| (ids.0.to_owned(), ids.1.to_owned()))
        })
        .await;
    server.wait_for_requests(2).await;

    // The run is listed in flight, with the command that follows it.
    let (code, status, stderr) = home.ryvos(&["status"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        status.contains(&format!("in flight: run {run} (session {session})"))
            && status.contains("look around")
            && status.contains(&format!("ryvos follow {run}")),
        "{status}"
    );
    // Followed by its session, and waited for by its id, from two more terminals.
    let mut followed = home.follow(&["follow", "--json", &session]);
    let waited = {
        let home_path = home.path().to_owned();
        let run = run.clone();
        let mut command = home.command(env!("CARGO_BIN_EXE_ryvos"));
        command.args(["wait", &run]).env("RYVOS_HOME", home_path);
        tokio::spawn(async move { common::cli::output(&mut command).await })
    };
    // The follower is told the turn stored before it came: it is attached.
    let turn = followed
        .until(|e| (e["type"] == "CheckpointSaved").then(|| e["turn"].clone()))
        .await;
    assert_eq!(turn, 1);
    gate.open();
    let delta = followed
        .until(|e| (e["type"] == "TextDelta").then(|| e["text"].clone()))
        .await;
    assert_eq!(delta, "all ");
    let followed = followed.rest().await;
    assert_eq!(followed.code, Some(0), "{}", followed.stderr);
    assert!(
        (followed.events.iter()).any(|e| e["type"] == "RunComplete" && e["run_id"] == run.as_str()),
        "{:?}",
        followed.events
    );
    let (code, answer, stderr) = waited.await.unwrap();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(answer.trim(), "all done");
    assert_eq!(running.rest().await.code, Some(0));

    // Ended: answered from the record, at once; the status lists nothing in flight.
    let (code, answer, stderr) = home.ryvos(&["wait", &session]).await;
    assert_eq!((code, answer.trim()), (0, "all done"), "{stderr}");
    let (_, status, _) = home.ryvos(&["status"]).await;
    assert!(status.contains("no run in flight"), "{status}");
    let (code, _, stderr) = home.ryvos(&["follow", "r_nosuchrun"]).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("not in flight here"), "{stderr}");
    home.shutdown(daemon).await;
}
