//! Who may use the console's door, through the real `ryvosd` and `ryvos`: bearer tokens made
//! by `ryvos token` (a `read` one sees but cannot approve, a revoked one nothing), approval
//! links carried by the notification (each works once, for its request and its action; a
//! GET acts on nothing), and console sessions that outlive a kill -9 of the daemon.

mod common;

use common::console::{client, console_home, get, log_in, login_link};
use common::home::{Home, WAIT};
use reqwest::header::AUTHORIZATION;
use reqwest::StatusCode;
use ryvos_testkit::ScriptedModelServer;
use serde_json::{json, Value};

/// Waits for `run`'s end: it completed, the call approved by `by` and run.
async fn finished_approved_by(run: common::home::Follower, home: &Home, by: &str) {
    let ended = tokio::time::timeout(WAIT, run.rest()).await.unwrap();
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    let resolved = ended
        .events
        .iter()
        .find(|e| e["type"] == "ApprovalResolved");
    assert_eq!(resolved.unwrap()["by"], by);
    assert!(home.workspace.path().join("proof.txt").exists());
}

/// `ryvos token create NAME --scope SCOPE`'s token (stdout holds it alone).
async fn token(home: &Home, name: &str, scope: &str) -> String {
    let (code, out, err) = home
        .ryvos(&["token", "create", name, "--scope", scope])
        .await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("shown only now"), "{err}");
    out.trim().to_owned()
}

/// POSTs `body` to `origin path` with bearer `token`: the status and the answer's JSON.
async fn post_as(origin: &str, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
    let answer = client()
        .post(format!("{origin}{path}"))
        .header(AUTHORIZATION, format!("Bearer {token}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = answer.status();
    (status, answer.json().await.unwrap_or(Value::Null))
}

async fn get_as(origin: &str, path: &str, token: &str) -> (StatusCode, String) {
    let answer = client()
        .get(format!("{origin}{path}"))
        .header(AUTHORIZATION, format!("Bearer {token}"))
        .send()
        .await
        .unwrap();
    (answer.status(), answer.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_token_sees_but_cannot_approve_a_revoked_one_sees_nothing_an_operate_one_approves() {
    let server = ScriptedModelServer::start(common::bash_proof_then_done()).await;
    let home = console_home(&server);
    let daemon = home.daemon().await;
    let reader = token(&home, "dashboard", "read").await;
    let operator = token(&home, "ci.bot", "operate").await;
    let (code, listed, _) = home.ryvos(&["token", "list"]).await;
    assert_eq!(code, 0);
    assert!(
        listed.contains("dashboard") && listed.contains("ci.bot"),
        "{listed}"
    );
    assert!(
        !listed.contains(&reader) && !listed.contains(&operator),
        "{listed}"
    );
    let (code, _, err) = home.ryvos(&["token", "create", "dashboard"]).await;
    assert_eq!(code, 1, "a name is taken once: {err}");

    let mut run = home.follow(&["run", "--json", "make the proof"]);
    let request_id = run
        .until(|e| (e["type"] == "ApprovalRequested").then(|| e["request_id"].clone()))
        .await;
    let request_id = request_id.as_str().unwrap();
    let (origin, _) = login_link(&home).await;

    let (status, approvals) = get_as(&origin, "/api/approvals", &reader).await;
    assert_eq!(status, StatusCode::OK, "{approvals}");
    assert!(approvals.contains(request_id), "{approvals}");
    let approve = format!("/api/approvals/{request_id}/approve");
    let (status, said) = post_as(&origin, &approve, &reader, json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{said}");
    assert!(
        said["error"].as_str().unwrap().contains("--scope operate"),
        "{said}"
    );
    assert!(!home.workspace.path().join("proof.txt").exists());

    let (code, _, err) = home.ryvos(&["token", "revoke", "dashboard"]).await;
    assert_eq!(code, 0, "{err}");
    let (status, body) = get_as(&origin, "/api/approvals", &reader).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(!body.contains(request_id));

    // A program's token is sent on purpose: no Origin is needed.
    let (status, said) = post_as(&origin, &approve, &operator, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{said}");
    finished_approved_by(run, &home, "token ci.bot").await;
    home.shutdown(daemon).await;
}

/// The request's id and the `RYVOS_*` variables the notify command was given.
async fn told(file: &std::path::Path) -> std::collections::HashMap<String, String> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if text.contains("RYVOS_DENY_URL=") && text.ends_with("END\n") {
            return text
                .lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        }
        assert!(tokio::time::Instant::now() < deadline, "not told: {text}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Presents `link` (the part after `#link=`) for `request` to the page's API.
async fn present(origin: &str, what: &str, request: &str, link: &str) -> (StatusCode, Value) {
    let answer = client()
        .post(format!("{origin}/api/links/{request}/{what}"))
        .json(&json!({ "link": link }))
        .send()
        .await
        .unwrap();
    let status = answer.status();
    (status, answer.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_link_works_once_and_a_tampered_foreign_or_replayed_one_grants_nothing() {
    let server = ScriptedModelServer::start(common::bash_proof_then_done()).await;
    let told_to = tempfile::tempdir().unwrap();
    let file = told_to.path().join("told");
    let notify = format!(
        "[daemon]\nnotify_command = [\"sh\", \"-c\", \"env | grep ^RYVOS_ > {0}.part; echo END >> {0}.part; mv {0}.part {0}\"]\n[http]\nlisten = \"127.0.0.1:0\"\n",
        file.display()
    );
    let home = Home::with_sections(&server, "", "", &notify);
    let daemon = home.daemon().await;
    let run = home.follow(&["run", "--json", "make the proof"]);
    let told = told(&file).await;
    let request_id = told["RYVOS_REQUEST_ID"].as_str();
    let (approve_url, deny_url) = (&told["RYVOS_APPROVE_URL"], &told["RYVOS_DENY_URL"]);
    assert!(
        approve_url.contains(&format!("/approval/{request_id}#link=")),
        "{approve_url}"
    );
    let (page, approve) = approve_url.split_once("#link=").unwrap();
    let deny = deny_url.split_once("#link=").unwrap().1;
    let origin = page.split("/approval/").next().unwrap();

    // Opening the link (as a preview would) shows a page and acts on nothing.
    let opened = client().get(page).send().await.unwrap();
    assert_eq!(opened.status(), StatusCode::OK);
    assert!(opened.text().await.unwrap().contains("/link.js"));
    let (status, looked) = present(origin, "look", request_id, approve).await;
    assert_eq!(status, StatusCode::OK, "{looked}");
    assert_eq!(looked["action"], "approve");
    assert_eq!(looked["request"]["tool"], "bash");
    assert!(!home.workspace.path().join("proof.txt").exists());

    let tampered = deny.replacen(".deny.", ".approve.", 1);
    let (status, said) = present(origin, "use", request_id, &tampered).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        said["error"].as_str().unwrap().contains("signature"),
        "{said}"
    );
    let (status, said) = present(origin, "use", "a_another", approve).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        said["error"].as_str().unwrap().contains("another"),
        "{said}"
    );
    assert!(!home.workspace.path().join("proof.txt").exists());

    let (status, said) = present(origin, "use", request_id, approve).await;
    assert_eq!(status, StatusCode::OK, "{said}");
    assert_eq!(said["approved"], true);
    let (status, said) = present(origin, "use", request_id, approve).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        said["error"].as_str().unwrap().contains("already used"),
        "{said}"
    );

    finished_approved_by(run, &home, "an approval link").await;
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_console_session_and_the_waiting_approval_outlive_a_kill_of_the_daemon() {
    let server = ScriptedModelServer::start(common::bash_proof_then_done()).await;
    let home = console_home(&server);
    let mut daemon = home.daemon().await;
    let mut run = home.follow(&["run", "--json", "make the proof"]);
    let request_id = run
        .until(|e| (e["type"] == "ApprovalRequested").then(|| e["request_id"].clone()))
        .await;
    let (origin, code) = login_link(&home).await;
    let cookie = log_in(&origin, &code).await.unwrap();
    daemon.start_kill().unwrap(); // SIGKILL
    daemon.wait().await.unwrap();
    run.rest().await;

    // The door opens on the same port only by chance: find it again.
    let daemon = home.daemon().await;
    let (_, status, _) = home.ryvos(&["status", "--json"]).await;
    let status: Value = serde_json::from_str(&status).unwrap();
    let origin = status["console"].as_str().unwrap();
    let (status, approvals) = get(origin, "/api/approvals", Some(&cookie)).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the session outlived the kill: {approvals}"
    );
    assert!(
        approvals.contains(request_id.as_str().unwrap()),
        "{approvals}"
    );
    home.shutdown(daemon).await;
}
