//! Small things a person meets at the terminal, each through the real binaries: what `-q`
//! prints, the hint after `max_turns`, a workspace that holds the home.

mod common;

use common::home::Home;
use ryvos_testkit::{Reply, ScriptedModelServer};

#[tokio::test]
async fn quiet_prints_the_answer_as_given_and_nothing_for_a_run_without_one() {
    let server = ScriptedModelServer::start([
        // An answer that ends in a newline: printed as it is, no blank line after it.
        Reply::text(&["two lines\n", "of it\n"]),
        // A run that fails: nothing on stdout, not even an empty line.
        Reply::error(400, "bad request"),
    ])
    .await;
    let home = Home::new(&server, "");
    let (code, stdout, stderr) = home.ryvos(&["run", "-q", "answer"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "two lines\nof it\n");
    let (code, stdout, stderr) = home.ryvos(&["run", "-q", "fail"]).await;
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        stdout, "",
        "the reason is on stderr, not in place of an answer"
    );
    assert!(stderr.contains("bad request"), "{stderr}");
}

#[tokio::test]
async fn a_max_turns_pause_says_that_a_new_prompt_goes_on() {
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("g1", "glob", r#"{"pattern": "*"}"#)]),
        Reply::tool_calls(&[("g2", "glob", r#"{"pattern": "*"}"#)]),
    ])
    .await;
    let home = Home::new(&server, "");
    let (code, _, stderr) = home.ryvos(&["run", "--max-turns", "1", "look"]).await;
    assert_eq!(code, 1, "{stderr}");
    // Not `--resume S` alone: the pending call would run and the run pause again.
    assert!(
        stderr.contains("max_turns") && stderr.contains("\"<next prompt>\""),
        "{stderr}"
    );
    assert!(stderr.contains("new count of turns"), "{stderr}");
}

#[tokio::test]
async fn a_workspace_that_holds_the_home_is_refused_before_the_model_is_asked() {
    let server = ScriptedModelServer::start([Reply::text(&["never asked"])]).await;
    let home = Home::new(&server, "");
    let ryvos_home = home.path().display().to_string();
    let (code, _, stderr) = home.ryvos(&["run", "--workspace", &ryvos_home, "hi"]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("holds") && stderr.contains("--workspace"),
        "{stderr}"
    );
    // Through the daemon too.
    let daemon = home.daemon().await;
    let (code, _, stderr) = home.ryvos(&["run", "--workspace", &ryvos_home, "hi"]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("--workspace"), "{stderr}");
    home.shutdown(daemon).await;
    assert!(server.requests().is_empty(), "no model call was made");
}

/// A session stored as a short CLI run leaves it: message sizes not counted yet (the tokenizer
/// was still loading), and a compaction that can be undone.
async fn compacted_session(home: &Home) -> (String, usize) {
    use ryvos::protocol::ids::{RunId, SessionId};
    use ryvos::protocol::message::Message;
    use ryvos::protocol::records::{Compaction, RunRecord, SessionRecord, Window};
    use ryvos::testing::{Store, StoredMessage, Write, WriteBatch};
    let config = ryvos::Config::with_home(home.path());
    let store = Store::open(&config.database_path(), true).unwrap();
    let session = SessionId::new("s_compacted");
    let page = "The quick brown fox jumps over the lazy dog near the river bank. ".repeat(40);
    let mut bytes = 0;
    let mut batch = WriteBatch::new(session.clone());
    for seq in 0..8u64 {
        let message = match seq {
            0 => Message::user("read every page"),
            _ => Message::user(&page),
        };
        bytes += serde_json::to_string(&message).unwrap().len();
        let stored = StoredMessage {
            seq,
            tokens: 0,
            message: std::sync::Arc::new(message),
        };
        batch.push(Write::Message(stored));
    }
    batch.push(Write::Session(SessionRecord {
        session_id: session.clone(),
        created_at_ms: 1,
        updated_at_ms: 1,
        message_count: 8,
        last_run: Some(RunId::new("r_done")),
        paused_calls: Vec::new(),
        workspace: None,
        title: None,
        last_status: Some(ryvos::RunStatus::Completed),
        measured: None,
        model_fit: None,
    }));
    let run = RunRecord::begun(RunId::new("r_done"), session.clone(), "read every page", 1);
    batch.push(Write::Run(RunRecord {
        status: Some(ryvos::RunStatus::Completed),
        ..run
    }));
    batch.push(Write::Compaction(Compaction {
        first_kept_seq: 6,
        first_seq: 0,
        summary: Some("Pages were read.".into()),
        previous: Some(Window {
            first_kept_seq: 0,
            summary: None,
        }),
        ..Compaction::default()
    }));
    store.write(&[batch]).await.unwrap();
    (session.to_string(), bytes)
}

#[tokio::test]
async fn compact_undo_counts_the_window_in_tokens_not_bytes() {
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    let (session, bytes) = compacted_session(&home).await;
    let (code, out, stderr) = home.ryvos(&["compact", "undo", &session, "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let undone: serde_json::Value = serde_json::from_str(&out).unwrap();
    let tokens = undone["context_tokens"].as_u64().unwrap();
    // English is about four characters a token: a byte count would be near `bytes`.
    assert!(
        tokens * 3 < bytes as u64,
        "{tokens} tokens for {bytes} bytes"
    );
    assert!(tokens > 0);
}
