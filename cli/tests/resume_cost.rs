//! Resuming a session costs what its size needs, not what its bytes suggest: the tokenizer
//! (~45 MiB, a tenth of a second to build) is not built while the model server's own count of
//! the conversation says no limit is near, also after a restart, when that count comes from
//! the session's record. Its own test binary: whether the tokenizer was built is process-wide.

mod common;

use common::Harness;
use ryvos::testing::tokenizer_asked_for;
use ryvos::RunStatus;
use ryvos_testkit::Reply;

/// Bytes of each file the model reads: two of them bound the history past half the decision
/// floor (4,000 tokens at `max_context_tokens = 10_000`), one does not.
const FILE_BYTES: usize = 2_500;

/// A run that reads `file`, then answers; the server counts the requests small.
fn read_then_answer(file: &str, counted: u64) -> Vec<Reply> {
    let args = format!(r#"{{"path": "{file}"}}"#);
    vec![
        Reply::text_then_tools(&["Reading."], &[("c1", "read", &args)]).usage(Some((counted, 5))),
        Reply::text(&["Read."]).usage(Some((counted + 700, 5))),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_measured_small_resumes_without_the_tokenizer() {
    let mut script = read_then_answer("a.txt", 300);
    script.extend(read_then_answer("b.txt", 1_100));
    script.push(Reply::text(&["Both files are read."]).usage(Some((1_900, 5))));
    let h = Harness::start(script, |c| c.agent.max_context_tokens = 10_000).await;
    for file in ["a.txt", "b.txt"] {
        let text = format!("{file} ").repeat(FILE_BYTES / 6);
        std::fs::write(h.workspace.path().join(file), text).unwrap();
    }
    let (_, first) = h.run(h.request("read a.txt")).await;
    assert_eq!(first.status, RunStatus::Completed, "{:?}", first.reason);
    let session = first.session_id.clone();
    let (_, second) = h
        .run(h.request("read b.txt").session(session.clone()))
        .await;
    assert_eq!(second.status, RunStatus::Completed, "{:?}", second.reason);
    assert!(
        !tokenizer_asked_for(),
        "two small runs do not need the tokenizer"
    );

    // A new process: the history, bounded by its bytes, is past half the floor; the server's
    // count kept on the session's record says it is far from it.
    let h = h.restart().await;
    let (_, third) = h
        .run(h.request("what did you read?").session(session))
        .await;
    assert_eq!(third.status, RunStatus::Completed, "{:?}", third.reason);
    assert!(
        !tokenizer_asked_for(),
        "the resumed session was sized by the server's count, without the tokenizer"
    );
}
