//! A resumed session goes on in its own workspace, wherever the command is typed, in-process
//! and through the daemon; a run told to work elsewhere says so.

mod common;

use common::cli;
use common::home::Home;
use ryvos_testkit::{Reply, ScriptedModelServer};

/// A session's first run, in `ws/` (beside the directory the commands are typed in), and the
/// replies of the run that resumes it: it reads `notes.txt` by its relative name.
fn script() -> Vec<Reply> {
    vec![
        Reply::text(&["noted"]),
        Reply::tool_calls(&[("c1", "read", r#"{"path": "notes.txt"}"#)]),
        Reply::text(&["read it"]),
        Reply::text(&["elsewhere"]),
    ]
}

#[tokio::test]
async fn a_resumed_session_works_in_its_own_workspace_in_process() {
    let server = ScriptedModelServer::start(script()).await;
    let home = Home::new(&server, "");
    resumes_in_its_own_workspace(&home, &server).await;
}

#[tokio::test]
async fn a_resumed_session_works_in_its_own_workspace_through_the_daemon() {
    let server = ScriptedModelServer::start(script()).await;
    let home = Home::new(&server, "");
    let daemon = home.daemon().await;
    resumes_in_its_own_workspace(&home, &server).await;
    home.shutdown(daemon).await;
}

async fn resumes_in_its_own_workspace(home: &Home, server: &ScriptedModelServer) {
    let ws = home.workspace.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "the meeting moved to Thursday").unwrap();
    let ws = ws.canonicalize().unwrap();
    let ws_arg = ws.display().to_string();
    let (code, out, stderr) = home
        .ryvos(&["run", "--json", "--workspace", &ws_arg, "remember", "this"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let session = first_session(&out);

    // Typed from the parent directory: the run reads the session's notes.txt.
    let (code, out, stderr) = home
        .ryvos(&[
            "run", "--json", "--resume", &session, "read", "the", "notes",
        ])
        .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("warning"), "nothing moved: {stderr}");
    let started = event(&out, "RunStarted");
    assert_eq!(started["workspace"], ws_arg.as_str());
    assert!(started.get("previous_workspace").is_none(), "{started}");
    let requests = server.requests();
    let result = requests[2].to_string();
    assert!(result.contains("the meeting moved to Thursday"), "{result}");
    assert_eq!(recorded_workspace(home, &session).await, ws_arg);

    // Told to work elsewhere, the run does, and says so on stderr and in its first event.
    let here = home.workspace.path().canonicalize().unwrap();
    let here = here.display().to_string();
    let (code, out, stderr) = home
        .ryvos(&[
            "run",
            "--json",
            "--resume",
            &session,
            "--workspace",
            &here,
            "and",
            "here?",
        ])
        .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!("worked in {ws_arg}")) && stderr.contains(&here),
        "{stderr}"
    );
    let started = event(&out, "RunStarted");
    assert_eq!(started["workspace"], here.as_str());
    assert_eq!(started["previous_workspace"], ws_arg.as_str());
    assert_eq!(recorded_workspace(home, &session).await, here);
}

/// The workspace `ryvos sessions` has on record for `session`.
async fn recorded_workspace(home: &Home, session: &str) -> String {
    let (code, out, stderr) = home.ryvos(&["sessions", "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let sessions: serde_json::Value = serde_json::from_str(&out).unwrap();
    let found = sessions
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session_id"] == session)
        .expect("the session is listed");
    found["workspace"].as_str().unwrap().to_owned()
}

/// The first event of type `kind` in `--json` output.
fn event(json_lines: &str, kind: &str) -> serde_json::Value {
    cli::json_lines(json_lines)
        .into_iter()
        .find(|e| e["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {json_lines}"))
}

/// The session id of the first event of `--json` output.
fn first_session(json_lines: &str) -> String {
    cli::json_lines(json_lines)
        .first()
        .and_then(|e| e["session_id"].as_str().map(str::to_owned))
        .expect("a run's events name its session")
}
