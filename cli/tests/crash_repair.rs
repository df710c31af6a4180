//! A session cut off by a crash mid-turn: on resume the history is repaired (the cut-off call
//! gets a result that says what happened), the unfinished run is recorded as failed, and no
//! orphan reaches the model.

mod common;

use common::{config_for, run_on, tool_results};
use ryvos::protocol::ids::{CallId, RunId};
use ryvos::protocol::message::{Message, ToolCall};
use ryvos::protocol::records::RunRecord;
use ryvos::testing::Inspect;
use ryvos::testing::{Store, StoredMessage, Write, WriteBatch};
use ryvos::{RunRequest, RunStatus, Runtime, SessionId};
use ryvos_testkit::{Reply, ScriptedModelServer};
use std::sync::Arc;

fn stored(seq: u64, message: Message) -> StoredMessage {
    StoredMessage {
        seq,
        tokens: 10,
        message: Arc::new(message),
    }
}

#[tokio::test]
async fn a_turn_cut_off_by_a_crash_is_repaired_on_resume() {
    let server = ScriptedModelServer::start([Reply::text(&["picking up"])]).await;
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let config = config_for(&server, home.path());
    let session = SessionId::new("s_crashed");
    let crashed_run = RunId::new("r_crashed");

    // What a crash between "the model asked for two calls" and "their results" leaves.
    {
        let store = Store::open(&config.database_path(), true).unwrap();
        let mut batch = WriteBatch::of(
            session.clone(),
            [
                stored(0, Message::user("build it")),
                stored(
                    1,
                    Message::Assistant {
                        content: "building".into(),
                        tool_calls: vec![
                            ToolCall {
                                id: CallId::new("k1"),
                                name: "bash".into(),
                                arguments: r#"{"command":"make"}"#.into(),
                            },
                            ToolCall {
                                id: CallId::new("k2"),
                                name: "read".into(),
                                arguments: r#"{"path":"log"}"#.into(),
                            },
                        ],
                        reasoning: Vec::new(),
                    },
                ),
                stored(
                    2,
                    Message::ToolResult {
                        call_id: CallId::new("k1"),
                        name: "bash".into(),
                        content: "ok".into(),
                        is_error: false,
                    },
                ),
            ]
            .map(Write::Message),
        );
        batch.push(Write::Run(RunRecord {
            run_id: crashed_run.clone(),
            session_id: session.clone(),
            prompt: "build it".into(),
            status: None,
            reason: None,
            output: String::new(),
            turns: 1,
            input_tokens: 0,
            output_tokens: 0,
            cost_microcents: 0,
            started_at_ms: 1,
            ended_at_ms: None,
            goal: None,
            model: None,
            park_reason: None,
            settings: Default::default(),
            model_calls: 0,
            active_ms: 0,
            directed_by: None,
        }));
        store.write(&[batch]).await.unwrap();
    }

    let runtime = Runtime::start(config).await.unwrap();
    let (_, outcome) = run_on(
        &runtime,
        RunRequest::new("continue")
            .session(session.clone())
            .workspace(workspace.path()),
    )
    .await;
    assert_eq!(outcome.status, RunStatus::Completed);

    let request = &server.requests()[0];
    let results = tool_results(request);
    assert_eq!(results.len(), 2);
    assert_eq!(results[0], ("k1".into(), "ok".into()));
    assert_eq!(results[1].0, "k2");
    assert!(results[1].1.starts_with("execution_error:") && results[1].1.contains("interrupted"));
    server.assert_no_orphans();

    let runs = runtime.store().session_runs(&session).await.unwrap();
    let old = runs.iter().find(|r| r.run_id == crashed_run).unwrap();
    assert_eq!(old.status, Some(RunStatus::Failed));
    assert!(old.reason.as_deref().unwrap().contains("interrupted"));
    // The repair itself is stored: reloading finds nothing left to mend.
    let history = runtime.store().load_session(&session).await.unwrap();
    assert!(
        ryvos::testing::repair::check(history.messages.iter().map(|m| m.message.as_ref()))
            .is_clean()
    );
    assert!(history.unfinished_runs.is_empty());
    runtime.shutdown().await.unwrap();
}
