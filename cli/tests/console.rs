//! The console's HTTP door, through the real `ryvosd` and `ryvos`: nothing is served without a
//! login, the one-time code from `ryvos console` logs in once, a change from another origin is
//! refused, and an approval given in the console lets the waiting run finish. A door that
//! would serve logins in plain text to the network is refused at start.

mod common;

use common::console::{client, console_home, get, log_in, login_link};
use common::home::{Home, WAIT};
use reqwest::header::{COOKIE, ORIGIN, SET_COOKIE};
use reqwest::StatusCode;
use ryvos_testkit::ScriptedModelServer;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread")]
async fn a_login_code_works_once_and_an_approval_in_the_console_finishes_the_run() {
    let server = ScriptedModelServer::start(common::bash_proof_then_done()).await;
    let home = console_home(&server);
    let daemon = home.daemon().await;
    let mut run = home.follow(&["run", "--json", "make the proof"]);
    let (request_id, session) = run
        .until(|event| {
            (event["type"] == "ApprovalRequested").then(|| {
                let id = |key: &str| event[key].as_str().unwrap().to_owned();
                (id("request_id"), id("session_id"))
            })
        })
        .await;
    let (origin, code) = login_link(&home).await;
    let (code_status, status_out, _) = home.ryvos(&["status"]).await;
    assert_eq!(code_status, 0);
    assert!(
        status_out.contains(&format!("console: {origin}")),
        "{status_out}"
    );

    // Nothing of any run without a session: every page and API answers 401.
    let history = format!("/api/sessions/{session}");
    let events = format!("/api/sessions/{session}/events");
    let paths = [
        "/",
        "/api/sessions",
        "/api/approvals",
        "/api/status",
        "/console.js",
    ];
    for path in paths.into_iter().chain([history.as_str(), events.as_str()]) {
        let (status, body) = get(&origin, path, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}: {body}");
        assert!(!body.contains(&session), "{path} shows the session: {body}");
        assert!(
            !body.contains(&request_id),
            "{path} shows the request: {body}"
        );
    }
    assert_eq!(
        log_in(&origin, "not-a-code").await,
        Err(StatusCode::UNAUTHORIZED)
    );
    let cookie = log_in(&origin, &code).await.expect("the code logs in");
    assert_eq!(
        log_in(&origin, &code).await,
        Err(StatusCode::UNAUTHORIZED),
        "a code works once"
    );
    let cookie = cookie.as_str();
    let (status, page) = get(&origin, "/", Some(cookie)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("/console.js"), "{page}");
    let (_, sessions) = get(&origin, "/api/sessions", Some(cookie)).await;
    let sessions: Value = serde_json::from_str(&sessions).unwrap();
    assert_eq!(sessions[0]["session_id"], session.as_str(), "{sessions}");
    let (_, approvals) = get(&origin, "/api/approvals", Some(cookie)).await;
    let approvals: Value = serde_json::from_str(&approvals).unwrap();
    assert_eq!(
        approvals[0]["request_id"],
        request_id.as_str(),
        "{approvals}"
    );
    assert_eq!(approvals[0]["tool"], "bash");

    // A page elsewhere cannot act with the person's session.
    let approve = format!("{origin}/api/approvals/{request_id}/approve");
    let foreign = client()
        .post(&approve)
        .header(COOKIE, cookie)
        .header(ORIGIN, "http://evil.example")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), StatusCode::FORBIDDEN);
    assert!(!home.workspace.path().join("proof.txt").exists());

    let approved = client()
        .post(&approve)
        .header(COOKIE, cookie)
        .header(ORIGIN, &origin)
        .json(&json!({ "reason": "looks right" }))
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), StatusCode::OK);
    let ended = tokio::time::timeout(WAIT, run.rest()).await.unwrap();
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    let resolved = ended
        .events
        .iter()
        .find(|e| e["type"] == "ApprovalResolved")
        .expect("ApprovalResolved");
    assert_eq!(resolved["by"], "the console", "{resolved}");
    assert!(home.workspace.path().join("proof.txt").exists());
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_console_in_plain_text_for_the_network_is_refused_at_start() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "[http]\nlisten = \"0.0.0.0:0\"\n");
    let output = home
        .command(env!("CARGO_BIN_EXE_ryvosd"))
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("allow_plaintext"), "{stderr}");
    assert!(stderr.contains("tls_cert"), "{stderr}");
    let (code, out, _) = home.ryvos(&["doctor"]).await;
    assert_eq!(code, 1, "{out}");
    let line = out
        .lines()
        .find(|l| l.contains(" console "))
        .unwrap_or_default();
    assert!(line.starts_with("FAIL"), "{out}");
    assert!(line.contains("allow_plaintext"), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_without_a_console_says_how_to_open_one() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    let daemon = home.daemon().await;
    let (code, _, err) = home.ryvos(&["console"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("[http] listen"), "{err}");
    home.shutdown(daemon).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn over_tls_the_console_is_https_and_its_cookie_secure() {
    let server = ScriptedModelServer::start([]).await;
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        // Its own end entity, not a CA: TLS clients refuse a CA's certificate as a server's.
        .args(["-addext", "basicConstraints=critical,CA:FALSE", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl runs");
    assert!(made.status.success(), "{made:?}");
    let http = format!(
        "[http]\nlisten = \"127.0.0.1:0\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\n",
        cert.display(),
        key.display()
    );
    let home = Home::new(&server, &http);
    let daemon = home.daemon().await;
    let (origin, code) = login_link(&home).await;
    assert!(origin.starts_with("https://127.0.0.1:"), "{origin}");
    let trusted = reqwest::Certificate::from_pem(&std::fs::read(&cert).unwrap()).unwrap();
    let client = reqwest::Client::builder()
        .add_root_certificate(trusted)
        .timeout(WAIT)
        .build()
        .unwrap();
    let answer = client
        .post(format!("{origin}/api/login"))
        .header(ORIGIN, &origin)
        .json(&json!({ "code": code }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::NO_CONTENT);
    let cookie = answer.headers()[SET_COOKIE].to_str().unwrap();
    assert!(cookie.contains("; Secure"), "{cookie}");
    // Plain HTTP to the TLS port is no way in.
    let plain = client
        .get(origin.replace("https://", "http://") + "/api/status")
        .send()
        .await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success());
    home.shutdown(daemon).await;
}
