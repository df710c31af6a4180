//! `ryvos store copy URL`: a home's redb records moved into an empty PostgreSQL database (the
//! test's own server), read back the same through the home switched to it.

mod common;

use common::backend::Backend;
use common::home::Home;
use ryvos_testkit::{postgres, Reply, ScriptedModelServer};
use serde_json::Value;

/// `ryvos ARGS --json` through `home`, parsed.
async fn json(home: &Home, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let (code, out, err) = home.ryvos(&args).await;
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(out.trim()).unwrap()
}

/// The sessions, each with its messages and runs, and the month's spending, as `home` reads
/// them.
async fn everything(home: &Home) -> (Vec<Value>, Value) {
    let mut sessions = Vec::new();
    for session in json(home, &["sessions"]).await.as_array().unwrap() {
        let id = session["session_id"].as_str().unwrap();
        let history = json(home, &["history", id]).await;
        sessions.push(serde_json::json!({
            "session": session,
            "messages": history["messages"],
            "runs": history["runs"],
        }));
    }
    (sessions, json(home, &["cost"]).await["month"].clone())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redb_homes_records_are_copied_into_postgresql_and_read_back_the_same() {
    if !Backend::Postgres.available() {
        return;
    }
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("g1", "glob", r#"{"pattern": "*"}"#)]).usage(Some((100, 10))),
        Reply::text(&["Nothing here."]).usage(Some((120, 5))),
        Reply::text(&["A second session."]).usage(Some((50, 5))),
        Reply::text(&["Resumed from the copy."]),
    ])
    .await;
    let priced =
        "[budget.pricing_overrides.scripted]\ninput_per_1m = 100.0\noutput_per_1m = 200.0\n";
    let home = Home::new(&server, priced);
    for prompt in ["what is here?", "and now?"] {
        let (code, _, err) = home.ryvos(&["run", prompt]).await;
        assert_eq!(code, 0, "{err}");
    }
    let before = everything(&home).await;
    assert_eq!(before.0.len(), 2);
    assert_eq!(before.1["calls"], 3);

    let url = postgres::shared().unwrap().database().unwrap();
    let (code, out, err) = home.ryvos(&["store", "copy", &url]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("copied 2 session(s) (6 messages, 2 runs)"),
        "{out}"
    );
    // Into a database that holds records already: refused, nothing written.
    let (code, _, err) = home.ryvos(&["store", "copy", &url]).await;
    assert_ne!(code, 0);
    assert!(err.contains("already holds sessions"), "{err}");

    let home = home.sharing(&url, 30);
    let after = everything(&home).await;
    assert_eq!(after, before);
    // A session goes on from the copy where it stopped.
    let session = before.0[0]["session"]["session_id"].as_str().unwrap();
    let (code, out, err) = home
        .ryvos(&["run", "-q", "--resume", session, "more?"])
        .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "Resumed from the copy.");
    let history = json(&home, &["history", session]).await;
    let before_messages = before.0[0]["messages"].as_array().unwrap().len();
    assert_eq!(
        history["messages"].as_array().unwrap().len(),
        before_messages + 2
    );
}
