use super::*;
use crate::message::Message;
use crate::store::{Compaction, StoredMessage, Write};
use std::sync::Arc;

fn message(seq: u64, tokens: u32, text: String) -> Write {
    Write::Message(StoredMessage {
        seq,
        tokens,
        message: Arc::new(Message::user(text)),
    })
}

#[tokio::test]
async fn batches_round_trip_and_sessions_stay_apart() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(&dir.path().join("t.redb"), true).unwrap();
    let a = SessionId::new("s_a");
    let b = SessionId::new("s_b");
    let mut batch_a = WriteBatch::of(
        a.clone(),
        (0..3).map(|seq| message(seq, 5, format!("a{seq}"))),
    );
    batch_a.push(Write::Run(RunRecord::begun(
        RunId::new("r_1"),
        a.clone(),
        "p",
        1,
    )));
    let batch_b = WriteBatch::of(b.clone(), [message(0, 1, "b0".into())]);
    store.write(&[batch_a, batch_b]).await.unwrap();
    drop(store);

    let store = RedbStore::open(&dir.path().join("t.redb"), true).unwrap();
    let ha = store.load_session(&a).await.unwrap();
    assert_eq!(ha.messages.len(), 3);
    assert_eq!(ha.messages[2].seq, 2);
    assert_eq!(*ha.messages[1].message, Message::user("a1"));
    assert_eq!(ha.unfinished_runs.len(), 1);
    let hb = store.load_session(&b).await.unwrap();
    assert_eq!(hb.messages.len(), 1);
    assert!(hb.unfinished_runs.is_empty());
    let none = store.load_session(&SessionId::new("s_none")).await.unwrap();
    assert!(none.messages.is_empty());
}

#[tokio::test]
async fn the_window_is_read_from_the_last_compaction_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(&dir.path().join("t.redb"), false).unwrap();
    let id = SessionId::new("s_w");
    let mut batch = WriteBatch::of(
        id.clone(),
        (0..10).map(|seq| message(seq, 1, format!("m{seq}"))),
    );
    batch.push(Write::Compaction(Compaction {
        first_kept_seq: 7,
        summary: None,
        ..Compaction::default()
    }));
    store.write(&[batch]).await.unwrap();
    let window = store.load_session_window(&id).await.unwrap();
    let seqs: Vec<u64> = window.messages.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, [7, 8, 9]);
    assert_eq!(window.next_seq, 10);
    let whole = store.load_session(&id).await.unwrap();
    assert_eq!((whole.messages.len(), whole.next_seq), (10, 10));
}

#[tokio::test]
async fn a_row_that_is_not_its_record_is_an_error_naming_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(&dir.path().join("t.redb"), false).unwrap();
    let txn = store.db().unwrap().begin_write().unwrap();
    {
        let mut plans = txn.open_table(PLANS.definition()).unwrap();
        plans
            .insert("s_bad", b"{\"not\": \"a plan\"}".as_slice())
            .unwrap();
    }
    txn.commit().unwrap();
    let e = store
        .plan(&SessionId::new("s_bad"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("table `plans` is not a PlanRecord"), "{e}");
    assert!(e.contains("s_bad"), "{e}");
}

#[tokio::test]
async fn credentials_keep_their_contract() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(&dir.path().join("t.redb"), true).unwrap();
    crate::store::credential_checks::credentials_keep_their_contract(&store).await;
}
