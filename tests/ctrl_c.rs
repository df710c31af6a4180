//! Ctrl-C during `ryvos run`, as a terminal sends it (SIGINT to the client): in-process the run
//! is interrupted, stored and resumable; through the daemon the first press interrupts the run
//! there and the second detaches, leaving it running.

mod common;

use common::home::{Ended, Home};
use ryvos_testkit::{Gate, Reply, ScriptedModelServer};

fn ctrl_c(pid: i32) {
    // SAFETY: kill only sends a signal to the client this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
}

/// A model whose first answer (a tool call) is held at `gate`, then answers "done".
async fn held_model(gate: &Gate) -> ScriptedModelServer {
    ScriptedModelServer::start([
        Reply::tool_calls(&[("c1", "glob", r#"{"pattern": "*"}"#)]).held(gate),
        Reply::text(&["done"]),
    ])
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_in_process_interrupts_the_run_which_is_stored_and_resumes() {
    let gate = Gate::new();
    let server = held_model(&gate).await;
    let home = Home::new(&server, "");
    let mut run = home.follow(&["run", "--json", "look", "around"]);
    let session = run
        .until(|e| e["session_id"].as_str().map(str::to_owned))
        .await;
    server.wait_for_requests(1).await;
    ctrl_c(run.pid());
    run.says("interrupting the run").await;
    // The model's answer in flight is awaited; its call stays pending.
    gate.open();
    let Ended {
        events,
        code,
        stderr,
    } = run.rest().await;
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("paused"), "{stderr}");
    assert!(
        stderr.contains(&format!("ryvos run --resume {session}")),
        "{stderr}"
    );
    assert_eq!(events.last().unwrap()["status"], "interrupted");

    let (code, stdout, stderr) = home.ryvos(&["run", "--resume", &session]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("done"), "{stdout}");
}

/// A run through the daemon whose model call is held, and Ctrl-C pressed once while it waits:
/// the client, once it has asked the daemon to interrupt, and the run's session.
async fn pressed_once_mid_call(
    home: &Home,
    server: &ScriptedModelServer,
) -> (common::home::Follower, String) {
    let mut run = home.follow(&["run", "--json", "look", "around"]);
    let session = run
        .until(|e| e["session_id"].as_str().map(str::to_owned))
        .await;
    server.wait_for_requests(1).await;
    ctrl_c(run.pid());
    run.says("asked ryvosd to interrupt").await;
    (run, session)
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_through_the_daemon_interrupts_there_and_a_second_press_detaches() {
    let gate = Gate::new();
    let server = held_model(&gate).await;
    let home = Home::new(&server, "");
    let daemon = home.daemon().await;

    // One press: the daemon interrupts the run, and the client reports its end.
    let (run, session) = pressed_once_mid_call(&home, &server).await;
    gate.open();
    let Ended { code, stderr, .. } = run.rest().await;
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    let (_, history, _) = home.ryvos(&["history", &session]).await;
    assert!(history.contains("interrupted"), "{history}");

    // Two presses: the client detaches and the run goes on in the daemon.
    let second = Gate::new();
    let server2 = held_model(&second).await;
    let home2 = Home::new(&server2, "");
    let daemon2 = home2.daemon().await;
    let (run, session) = pressed_once_mid_call(&home2, &server2).await;
    ctrl_c(run.pid());
    let Ended { code, stderr, .. } = run.rest().await;
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("detached"), "{stderr}");
    second.open();
    // The run ends in the daemon on its own.
    let ended = async {
        loop {
            let (_, history, _) = home2.ryvos(&["history", &session]).await;
            if history.contains("interrupted") {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(common::home::WAIT, ended)
        .await
        .expect("the detached run ended in the daemon");
    home2.shutdown(daemon2).await;
    home.shutdown(daemon).await;
}
