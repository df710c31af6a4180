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
        rewinding: None,
        last_rewind: None,
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

#[tokio::test]
async fn ryvosds_log_is_as_its_documentation_says() {
    use tokio::io::AsyncBufReadExt;
    let guide =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/telemetry.md"))
            .unwrap();
    assert!(guide.contains("## ryvosd's log") && guide.contains("RUST_LOG"));
    let server = ScriptedModelServer::start([]).await;
    let home = Home::new(&server, "");
    let mut daemon = home
        .command(env!("CARGO_BIN_EXE_ryvosd"))
        .env("RUST_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(daemon.stderr.take().unwrap()).lines();
    let record = tokio::time::timeout(common::home::WAIT, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains(" INFO ") {
                return line;
            }
        }
        panic!("ryvosd wrote no INFO record");
    })
    .await
    .unwrap();
    // The time (RFC 3339, UTC), the level, the module: as documented.
    let (time, rest) = record.split_once(' ').unwrap();
    assert!(
        time.len() > 20 && time.ends_with('Z') && time.contains('T'),
        "{record}"
    );
    assert!(rest.trim_start().starts_with("INFO ryvos"), "{record}");
    daemon.start_kill().unwrap();
    daemon.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_held_by_an_in_process_run_is_named_at_once_by_the_read_commands() {
    let gate = ryvos_testkit::Gate::new();
    let server = ScriptedModelServer::start([Reply::text(&["done"]).held(&gate)]).await;
    let home = Home::new(&server, "");
    let running = home.follow(&["run", "--json", "hold", "on"]);
    server.wait_for_requests(1).await;
    for read in ["sessions", "approvals"] {
        let (code, _, stderr) = home.ryvos(&[read]).await;
        assert_eq!(code, 1, "{stderr}");
        // Who holds it, and what to do: not a wait, nor "held for 10s".
        assert!(
            stderr.contains("in use by `ryvos run") && stderr.contains("start ryvosd"),
            "{read}: {stderr}"
        );
    }
    gate.open();
    assert_eq!(running.rest().await.code, Some(0));
}

#[tokio::test]
async fn an_in_process_run_off_a_terminal_denies_what_nobody_can_answer_at_once() {
    // Stdin is not a terminal here.
    let (_server, home) = Home::asking_bash("touch made", "could not").await;
    let (code, _, stderr) = home.ryvos(&["run", "make", "it"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("denied: nobody can answer it"), "{stderr}");
    assert!(!home.workspace.path().join("made").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_kept_in_the_store_is_answered_with_no_daemon_and_its_run_takes_it() {
    let (_server, home) = Home::asking_bash("touch made", "made it").await;
    let daemon = home.daemon().await;
    let mut run = home.follow(&["run", "--json", "make", "it"]);
    let (session, request) = run
        .until(|e| {
            let asked = e["type"] == "ApprovalRequested";
            let ids = (e["session_id"].as_str()?, e["request_id"].as_str()?);
            asked.then(|| (ids.0.to_owned(), ids.1.to_owned()))
        })
        .await;
    // The daemon stops while the request waits: it is kept in the store.
    home.shutdown(daemon).await;
    run.rest().await;
    let (code, listed, stderr) = home.ryvos(&["approvals"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(listed.contains(&request), "{listed}");
    let (code, said, stderr) = home.ryvos(&["approve", &request]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        said.contains(&format!("ryvos run --resume {session}")),
        "{said}"
    );
    // The next run takes the answer: the call runs, nobody is asked.
    let (code, stdout, stderr) = home.ryvos(&["run", "--resume", &session, "go on"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("made it"), "{stdout}");
    assert!(home.workspace.path().join("made").exists(), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_that_starts_ends_the_runs_a_kill_cut_off_as_interrupted_with_their_turns() {
    let gate = ryvos_testkit::Gate::new();
    let server = ScriptedModelServer::start([
        Reply::tool_calls(&[("g1", "glob", r#"{"pattern": "*"}"#)]),
        Reply::text(&["never"]).held(&gate),
    ])
    .await;
    let home = Home::new(&server, "");
    let mut daemon = home.daemon().await;
    let mut run = home.follow(&["run", "--json", "look"]);
    let session = run
        .until(|e| {
            let session = e["session_id"].as_str()?.to_owned();
            (e["type"] == "CheckpointSaved").then_some(session)
        })
        .await;
    server.wait_for_requests(2).await;
    daemon.start_kill().unwrap();
    daemon.wait().await.unwrap();
    run.rest().await;

    let daemon = home.daemon().await;
    let (_, listed, _) = home.ryvos(&["sessions", "--json"]).await;
    let sessions: Vec<serde_json::Value> = serde_json::from_str(&listed).unwrap();
    let record = sessions
        .iter()
        .find(|s| s["session_id"] == session.as_str())
        .unwrap();
    assert_eq!(record["last_status"], "interrupted", "{record}");
    let (_, history, _) = home.ryvos(&["history", &session, "--json"]).await;
    let history: serde_json::Value = serde_json::from_str(&history).unwrap();
    let cut = &history["runs"][0];
    assert_eq!(cut["status"], "interrupted", "{cut}");
    assert_eq!(cut["turns"], 1, "the stored turn is counted: {cut}");
    assert!(
        cut["reason"].as_str().unwrap().contains("crash or a kill"),
        "{cut}"
    );
    home.shutdown(daemon).await;
    gate.open();
}
