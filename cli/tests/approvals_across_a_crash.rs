//! A call waiting for approval when `ryvosd` is killed (-9) never runs without a decision and
//! is never written off as cut off: after the restart its request is still listed; resuming the
//! session asks again under the same id, or applies the answer given meanwhile.

mod common;

use common::home::{Ended, Home, WAIT};
use ryvos_testkit::ScriptedModelServer;
use tokio::process::Child;

/// A daemon whose run waits for approval of a `bash` call when it is killed: the home, the new
/// daemon, the request's id and the session.
async fn killed_while_waiting(server: &ScriptedModelServer) -> (Home, Child, String, String) {
    // The default policy: T3 (bash) asks.
    let home = Home::with_sections(server, "", "", "");
    let mut daemon = home.daemon().await;
    let mut run = home.follow(&["run", "--json", "make the proof"]);
    let (request_id, session) = run
        .until(|event| {
            (event["type"] == "ApprovalRequested").then(|| {
                (
                    event["request_id"].as_str().unwrap().to_owned(),
                    event["session_id"].as_str().unwrap().to_owned(),
                )
            })
        })
        .await;
    daemon.start_kill().unwrap(); // SIGKILL
    daemon.wait().await.unwrap();
    let Ended { code, .. } = run.rest().await;
    assert_eq!(code, Some(3), "the client says it lost the daemon");

    let daemon = home.daemon().await;
    let (code, listed, _) = home.ryvos(&["approvals"]).await;
    assert_eq!(code, 0);
    assert!(listed.contains(&request_id), "still listed: {listed}");
    assert!(!home.workspace.path().join("proof.txt").exists());
    (home, daemon, request_id, session)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_waiting_for_approval_at_a_kill_is_asked_again_on_resume() {
    let server = ScriptedModelServer::start(common::bash_proof_then_done()).await;
    let (home, _daemon, request_id, session) = killed_while_waiting(&server).await;

    let mut resumed = home.follow(&["run", "--json", "--resume", &session, "go", "on"]);
    let asked_again = resumed
        .until(|event| {
            (event["type"] == "ApprovalRequested")
                .then(|| event["request_id"].as_str().unwrap().to_owned())
        })
        .await;
    assert_eq!(asked_again, request_id, "asked again under its id");
    assert!(!home.workspace.path().join("proof.txt").exists());
    let (code, _, stderr) = home.ryvos(&["approve", &request_id]).await;
    assert_eq!(code, 0, "{stderr}");
    let Ended {
        events,
        code,
        stderr,
    } = tokio::time::timeout(WAIT, resumed.rest()).await.unwrap();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(events.last().unwrap()["output"], "Done.");
    assert_eq!(
        std::fs::read_to_string(home.workspace.path().join("proof.txt")).unwrap(),
        "approved\n"
    );
    // The model got the call's real result, not a cut-off one.
    let last = server.requests().pop().unwrap();
    let results = common::tool_results(&last);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(!results[0].1.contains("cut off"), "{results:?}");
    server.assert_no_orphans();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_given_after_the_kill_is_applied_on_resume_without_asking() {
    let server = ScriptedModelServer::start(common::bash_proof_then_done()).await;
    let (home, _daemon, request_id, session) = killed_while_waiting(&server).await;
    let (code, _, stderr) = home.ryvos(&["approve", &request_id]).await;
    assert_eq!(code, 0, "{stderr}");

    let (code, stdout, stderr) = home
        .ryvos(&["run", "--json", "--resume", &session, "go", "on"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let events = common::cli::json_lines(&stdout);
    assert!(
        !events.iter().any(|e| e["type"] == "ApprovalRequested"),
        "not asked twice"
    );
    assert!(events.iter().any(|e| e["type"] == "ApprovalResolved"
        && e["request_id"] == request_id.as_str()
        && e["approved"] == true));
    assert_eq!(
        std::fs::read_to_string(home.workspace.path().join("proof.txt")).unwrap(),
        "approved\n"
    );
    let (_, listed, _) = home.ryvos(&["approvals"]).await;
    assert!(!listed.contains(&request_id), "{listed}");
}
