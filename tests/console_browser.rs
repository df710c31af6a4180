//! The console in a real headless Chromium with a phone's window, against the real `ryvosd`:
//! a stranger sees only the login page; the link `ryvos console` prints logs in; a call waiting
//! for approval shows with its tool, and approving it by keyboard lets the run finish.

mod common;

use common::browser::Browser;
use common::home::{Home, WAIT};
use fantoccini::key::Key;
use fantoccini::Locator;
use ryvos_testkit::{Reply, ScriptedModelServer};

#[tokio::test(flavor = "multi_thread")]
async fn a_person_logs_in_with_the_link_and_approves_a_call_by_keyboard() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("b1", "bash", r#"{"command": "echo approved > proof.txt"}"#)]),
        Reply::text(&["Done."]),
    ])
    .await;
    // The default policy: bash asks.
    let home = Home::with_sections(&server, "", "", "[http]\nlisten = \"127.0.0.1:0\"\n");
    let daemon = home.daemon().await;
    let mut run = home.follow(&["run", "--json", "make the proof"]);
    let session = run
        .until(|e| (e["type"] == "ApprovalRequested").then(|| e["session_id"].clone()))
        .await;
    let session = session.as_str().unwrap().to_owned();
    let (code, link, err) = home.ryvos(&["console"]).await;
    assert_eq!(code, 0, "{err}");
    let link = link.trim();
    let origin = link.split("/#").next().unwrap();

    // A stranger: the login page, nothing of the run.
    browser.client.goto(origin).await.unwrap();
    let stranger = browser.text_with("main", "Log in").await;
    assert!(!stranger.contains(&session), "{stranger}");
    assert!(!stranger.contains("bash"), "{stranger}");

    // The link logs in, and the code leaves the address bar.
    browser.client.goto(link).await.unwrap();
    let waiting = browser.text_with("#approvals li", "bash").await;
    assert!(waiting.contains("echo approved > proof.txt"), "{waiting}");
    let address = browser.client.current_url().await.unwrap();
    assert!(!address.as_str().contains("code"), "{address}");
    browser.text_with("#sessions tr", "make the proof").await;
    assert!(!home.workspace.path().join("proof.txt").exists());

    // Approved by keyboard: the button takes Enter.
    let approve = browser
        .client
        .find(Locator::Css("#approvals li button.approve"))
        .await
        .unwrap();
    approve.send_keys(&Key::Enter.to_string()).await.unwrap();
    let ended = tokio::time::timeout(WAIT, run.rest()).await.unwrap();
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    assert!(home.workspace.path().join("proof.txt").exists());
    browser
        .text_with("#no-approvals", "No call is waiting")
        .await;
    browser.text_with("#sessions tr", "completed").await;
    browser.close().await;
    home.shutdown(daemon).await;
}
