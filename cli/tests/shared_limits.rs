//! Limits and answers shared by daemons on one PostgreSQL database: the real `ryvosd` and
//! `ryvos` binaries, two homes sharing a database the test starts, a scripted model server.
//!
//! Both daemons add their spending to one monthly total, and each checks the month against
//! that total, the other's spending included; an approval request waiting on one daemon is
//! listed and answered through the other, from its command line or, with a token made on the
//! first, from its console's API.

mod common;

use common::backend::Backend;
use common::home::{Ended, Home};
use ryvos_testkit::{postgres, Reply, ScriptedModelServer};
use serde_json::Value;
use std::sync::Arc;

/// Each call costs 70 cents: 1,000 input and 1,000 output tokens at these prices; the month
/// is limited to $3.
const PRICED: &str = "[budget]\nmonthly_limit_cents = 300\n\
    [budget.pricing_overrides.scripted]\ninput_per_1m = 20000.0\noutput_per_1m = 50000.0\n";

/// Two homes on a new database of the test server, their daemons started.
async fn two_daemons(homes: [Home; 2]) -> Option<([Home; 2], Vec<tokio::process::Child>)> {
    let url = postgres::shared()?.database().unwrap();
    let homes = homes.map(|home| home.sharing(&url, 30));
    let mut daemons = Vec::new();
    for home in &homes {
        daemons.push(home.daemon().await);
    }
    Some((homes, daemons))
}

/// The month's spending as `ryvos cost --json` reports it through `home`.
async fn month(home: &Home) -> Value {
    let (code, out, err) = home.ryvos(&["cost", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    report["month"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn daemons_add_to_one_monthly_total_and_each_checks_the_limit_against_it() {
    if !Backend::Postgres.available() {
        return;
    }
    let answer = Arc::new(|_: &Value| Some(Reply::text(&["ok"]).usage(Some((1000, 1000)))));
    let server = ScriptedModelServer::start_routed([], Some(answer)).await;
    let homes = [Home::new(&server, PRICED), Home::new(&server, PRICED)];
    let Some(([a, b], _daemons)) = two_daemons(homes).await else {
        return;
    };
    for (home, prompt) in [(&a, "one"), (&a, "two"), (&b, "three"), (&b, "four")] {
        let (code, _, err) = home.ryvos(&["run", prompt]).await;
        assert_eq!(code, 0, "{prompt}: {err}");
    }
    // The first daemon spends again after the second did: it adds to the total the second
    // left, and the month reaches $3.50 (it was below the limit when the call was allowed).
    let (code, _, err) = a.ryvos(&["run", "five"]).await;
    assert_eq!(code, 0, "{err}");
    let spent = month(&b).await;
    assert_eq!(spent["calls"], 5, "{spent}");
    assert_eq!(spent["cost_cents"], 350.0, "{spent}");
    // The second daemon's own spending is $1.40, but the month's is over the limit: refused,
    // once its view of the month is older than the second it may be.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (code, _, err) = b.ryvos(&["run", "six"]).await;
    assert_ne!(code, 0);
    assert!(err.contains("monthly limit"), "{err}");
    assert_eq!(month(&a).await["calls"], 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_waiting_on_one_daemon_is_answered_through_another() {
    if !Backend::Postgres.available() {
        return;
    }
    let server = ScriptedModelServer::start(common::bash_proof_then_done()).await;
    // The default policy: T3 (bash) asks.
    let homes = [
        Home::with_sections(&server, "", "", ""),
        Home::with_sections(&server, "", "", ""),
    ];
    let Some(([a, b], _daemons)) = two_daemons(homes).await else {
        return;
    };
    let mut run = a.follow(&["run", "--json", "make the proof"]);
    let request_id = run
        .until(|event| {
            (event["type"] == "ApprovalRequested")
                .then(|| event["request_id"].as_str().unwrap().to_owned())
        })
        .await;
    // Every daemon lists the cluster's requests.
    let (code, listed, _) = b.ryvos(&["approvals", "--json"]).await;
    assert_eq!(code, 0);
    assert!(listed.contains(&request_id), "{listed}");
    let (code, _, stderr) = b.ryvos(&["approve", &request_id]).await;
    assert_eq!(code, 0, "{stderr}");
    let Ended { events, code, .. } = run.rest().await;
    assert_eq!(code, Some(0));
    assert!(events.iter().any(|e| e["type"] == "ApprovalResolved"
        && e["approved"] == true
        && e["by"] == "ryvos approve"));
    assert_eq!(
        std::fs::read_to_string(a.workspace.path().join("proof.txt")).unwrap(),
        "approved\n"
    );
    // Answered, the request waits nowhere: both daemons say so, and the answer is refused.
    for home in [&a, &b] {
        let (code, _, stderr) = home.ryvos(&["deny", &request_id]).await;
        assert_ne!(code, 0);
        assert!(stderr.contains("no approval request"), "{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_made_on_one_daemon_approves_through_anothers_console_a_call_waiting_on_the_first()
{
    if !Backend::Postgres.available() {
        return;
    }
    let server = ScriptedModelServer::start(common::bash_proof_then_done()).await;
    let console = "[http]\nlisten = \"127.0.0.1:0\"\n";
    let homes = [
        Home::with_sections(&server, "", "", ""),
        Home::with_sections(&server, "", "", console),
    ];
    let Some(([a, b], _daemons)) = two_daemons(homes).await else {
        return;
    };
    let (code, token, err) = a.ryvos(&["token", "create", "pager"]).await;
    assert_eq!(code, 0, "{err}");
    let token = format!("Bearer {}", token.trim());
    let mut run = a.follow(&["run", "--json", "make the proof"]);
    let request_id = run
        .until(|e| (e["type"] == "ApprovalRequested").then(|| e["request_id"].clone()))
        .await;
    let request_id = request_id.as_str().unwrap();
    let (_, status, _) = b.ryvos(&["status", "--json"]).await;
    let status: Value = serde_json::from_str(&status).unwrap();
    let origin = status["console"].as_str().unwrap();
    let http = reqwest::Client::new();
    let approvals: Value = http
        .get(format!("{origin}/api/approvals"))
        .header("authorization", &token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(approvals[0]["request_id"], request_id, "{approvals}");
    let approved = http
        .post(format!("{origin}/api/approvals/{request_id}/approve"))
        .header("authorization", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), reqwest::StatusCode::OK);
    let Ended { events, code, .. } = run.rest().await;
    assert_eq!(code, Some(0));
    assert!(events
        .iter()
        .any(|e| e["type"] == "ApprovalResolved" && e["by"] == "token pager"));
    assert!(a.workspace.path().join("proof.txt").exists());
}
