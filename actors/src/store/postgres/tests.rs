//! The PostgreSQL store against a real server (skipped, saying so, where none is installed).

use super::*;
use crate::message::Message;
use crate::store::{Compaction, RedbStore, StoredMessage, Write};
use ryvos_testkit::postgres;

const TTL: Duration = Duration::from_secs(30);

/// A new daemon's name.
fn node() -> String {
    format!("d_{}", ulid::Ulid::new().to_string().to_lowercase())
}

fn message(seq: u64, tokens: u32, text: String) -> Write {
    Write::Message(StoredMessage {
        seq,
        tokens,
        message: Arc::new(Message::user(text)),
    })
}

fn run(id: &str, session: &SessionId) -> RunRecord {
    RunRecord::begun(RunId::new(id), session.clone(), "p", 1)
}

/// A store on a new database of the test server.
async fn store() -> Option<PostgresStore> {
    let url = postgres::shared()?.database().unwrap();
    Some(
        PostgresStore::open(&url, 4, true, TTL, &node())
            .await
            .unwrap(),
    )
}

#[tokio::test]
async fn batches_round_trip_in_order_and_sessions_stay_apart() {
    let Some(store) = store().await else { return };
    let a = SessionId::new("s_a");
    let b = SessionId::new("s_b");
    let mut batch_a = WriteBatch::of(
        a.clone(),
        (0..3).map(|seq| message(seq, 5, format!("a{seq}"))),
    );
    batch_a.push(Write::Run(run("r_2", &a)));
    batch_a.push(Write::Run(run("r_1", &a)));
    let batch_b = WriteBatch::of(b.clone(), [message(0, 1, "b0".into())]);
    store.write(&[batch_a, batch_b]).await.unwrap();

    let ha = store.load_session(&a).await.unwrap();
    assert_eq!(ha.messages.len(), 3);
    assert_eq!((ha.messages[2].seq, ha.messages[2].tokens), (2, 5));
    assert_eq!(*ha.messages[1].message, Message::user("a1"));
    let unfinished: Vec<&str> = ha
        .unfinished_runs
        .iter()
        .map(|r| r.run_id.as_str())
        .collect();
    assert_eq!(unfinished, ["r_1", "r_2"], "runs in id order");
    assert_eq!(ha.next_seq, 3);
    let hb = store.load_session(&b).await.unwrap();
    assert_eq!(hb.messages.len(), 1);
    assert!(hb.unfinished_runs.is_empty());
    let none = store.load_session(&SessionId::new("s_none")).await.unwrap();
    assert!(none.messages.is_empty() && none.next_seq == 0);
    let next = store
        .next_seqs(&[a.clone(), SessionId::new("s_none")])
        .await
        .unwrap();
    assert_eq!(next[&a], 3);
    assert_eq!(next[&SessionId::new("s_none")], 0);
}

#[tokio::test]
async fn the_window_is_read_from_the_last_compaction_on() {
    let Some(store) = store().await else { return };
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
async fn memories_rank_as_in_the_embedded_store() {
    let Some(store) = store().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let redb = RedbStore::open(&dir.path().join("t.redb"), false).unwrap();
    let entry = |id: &str, content: &str, tags: &[&str]| MemoryEntry {
        id: id.into(),
        content: content.into(),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        session_id: SessionId::new("s"),
        created_at_ms: 0,
        embedding: None,
    };
    let first = WriteBatch::of(
        SessionId::new("s"),
        [
            Write::Memory(entry("m1", "the deploy key is in vault 7", &["ops"])),
            Write::Memory(entry("m2", "deploy on fridays never", &[])),
            Write::Memory(entry(
                "m3",
                "gamma rays and o'brien's back\\slash",
                &["deploy"],
            )),
        ],
    );
    // m2 rewritten: its old words leave the index and the totals.
    let second = WriteBatch::of(
        SessionId::new("s"),
        [Write::Memory(entry("m2", "deploy deploy on mondays", &[]))],
    );
    for backend in [&store as &dyn Storage, &redb] {
        backend.write(std::slice::from_ref(&first)).await.unwrap();
        backend.write(std::slice::from_ref(&second)).await.unwrap();
    }
    for query in [
        "deploy key",
        "fridays",
        "mondays vault",
        "o'brien",
        "ops",
        "the",
    ] {
        let mut pg: Vec<(String, f64)> = store
            .keyword_scores(query)
            .await
            .unwrap()
            .into_iter()
            .collect();
        let mut embedded: Vec<(String, f64)> = redb
            .keyword_scores(query)
            .await
            .unwrap()
            .into_iter()
            .collect();
        pg.sort_by(|a, b| a.0.cmp(&b.0));
        embedded.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(pg.len(), embedded.len(), "{query}: {pg:?} vs {embedded:?}");
        for ((a, x), (b, y)) in pg.iter().zip(&embedded) {
            assert_eq!(a, b, "{query}");
            assert!((x - y).abs() < 1e-9, "{query}: {a} {x} vs {y}");
        }
    }
    assert!(store.keyword_scores("fridays").await.unwrap().is_empty());
    assert_eq!(
        store.memory("m2").await.unwrap().unwrap().content,
        "deploy deploy on mondays"
    );
}

#[tokio::test]
async fn the_schema_is_migrated_once_and_a_newer_one_is_refused() {
    let Some(server) = postgres::shared() else {
        return;
    };
    let url = server.database().unwrap();
    // Daemons starting together: each migrates or finds it done.
    let opened = futures_util::future::join_all(
        (0..4).map(|_| async { PostgresStore::open(&url, 2, true, TTL, &node()).await }),
    )
    .await;
    for store in &opened {
        assert!(store.is_ok(), "{:?}", store.as_ref().err());
    }
    let store = opened.into_iter().next().unwrap().unwrap();
    assert_eq!(store.schema_version().await.unwrap(), schema::LATEST);
    let client = store.pool.get().await.unwrap();
    client
        .execute(
            "INSERT INTO ryvos_schema (version) VALUES ($1)",
            &[&(schema::LATEST + 1)],
        )
        .await
        .unwrap();
    let refused = PostgresStore::open(&url, 2, true, TTL, &node())
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(refused.contains("newer than this Ryvos knows"), "{refused}");
    assert!(refused.contains("upgrade"), "{refused}");
    // A daemon already running sees the newer schema at its next heartbeat (its own keeper's,
    // or this one), and stops taking work.
    keeper(&store).renew(&store.leases).await.unwrap();
    let fault = store.fault().expect("a newer schema is a fault");
    assert!(fault.contains("upgrade it"), "{fault}");
    let claim = store.claim_runs(1).await.err().unwrap().to_string();
    assert!(claim.contains("takes no more queued runs"), "{claim}");
}

#[tokio::test]
async fn a_bad_url_and_an_unreachable_server_are_errors_that_say_so() {
    let bad = PostgresStore::open("postgres://x@:what", 1, true, TTL, &node())
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(bad.contains("[store] url"), "{bad}");
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://ryvos@127.0.0.1:{port}/none?connect_timeout=2");
    let down = PostgresStore::open(&url, 1, true, TTL, &node())
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        down.contains("Connection refused") || down.contains("connecting"),
        "{down}"
    );
}

/// Two daemons' stores on one new database.
async fn two_daemons() -> Option<(PostgresStore, PostgresStore)> {
    let url = postgres::shared()?.database().unwrap();
    let a = PostgresStore::open(&url, 2, true, TTL, &node())
        .await
        .unwrap();
    let b = PostgresStore::open(&url, 2, true, TTL, &node())
        .await
        .unwrap();
    Some((a, b))
}

/// Lets every lease on `id` lapse, as if its holder had stopped renewing it long ago.
async fn lapse(store: &PostgresStore, id: &SessionId) {
    let client = store.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE leases SET expires_at = now() - interval '1 second' WHERE session_id = $1",
            &[&id.as_str()],
        )
        .await
        .unwrap();
}

fn keeper(store: &PostgresStore) -> leases::Keeper {
    leases::Keeper {
        pool: store.pool.clone(),
        node: store.node.clone(),
        ttl: TTL,
        schema: store.schema.clone(),
    }
}

#[tokio::test]
async fn a_session_is_run_by_one_daemon_at_a_time_and_a_released_one_moves() {
    let Some((a, b)) = two_daemons().await else {
        return;
    };
    let s = SessionId::new("s_lease");
    let first = a.lease(&s).await.unwrap();
    assert!(
        first.changed_hands,
        "a session never held before is not known"
    );
    let refused = b.lease(&s).await.unwrap_err().to_string();
    assert!(refused.contains(a.node().unwrap()), "{refused}");
    assert!(refused.contains("lease ends in"), "{refused}");
    a.write(&[WriteBatch::of(s.clone(), [message(0, 1, "a0".into())])])
        .await
        .unwrap();
    // The same daemon again: nobody wrote meanwhile.
    let again = a.lease(&s).await.unwrap();
    assert!(
        !again.changed_hands && again.generation > first.generation,
        "{first:?} {again:?}"
    );

    a.release(&s).await.unwrap();
    let taken = b.lease(&s).await.unwrap();
    assert!(taken.changed_hands, "b must load what a wrote");
    b.write(&[WriteBatch::of(s.clone(), [message(1, 1, "b1".into())])])
        .await
        .unwrap();
    let back = a.lease(&s).await;
    assert!(back.is_err(), "b holds it now");
    assert_eq!(b.load_session(&s).await.unwrap().next_seq, 2);
}

#[tokio::test]
async fn a_daemon_whose_lease_was_taken_over_can_never_write_to_the_session_again() {
    let Some((a, b)) = two_daemons().await else {
        return;
    };
    let s = SessionId::new("s_fenced");
    let other = SessionId::new("s_other");
    a.lease(&s).await.unwrap();
    a.lease(&other).await.unwrap();
    a.write(&[WriteBatch::of(s.clone(), [message(0, 1, "a0".into())])])
        .await
        .unwrap();
    // A lapses (a pause, a partition) without knowing it, and b takes the session over.
    lapse(&a, &s).await;
    b.lease(&s).await.unwrap();
    b.write(&[WriteBatch::of(s.clone(), [message(1, 1, "b1".into())])])
        .await
        .unwrap();

    // a's next write is fenced in its own transaction: nothing of it is stored.
    let stale = [
        WriteBatch::of(s.clone(), [message(1, 1, "a1".into())]),
        WriteBatch::of(other.clone(), [message(0, 1, "o0".into())]),
    ];
    let refused = a.write(&stale).await.unwrap_err().to_string();
    assert!(
        refused.contains("another daemon took the session over"),
        "{refused}"
    );
    let history = b.load_session(&s).await.unwrap();
    let texts: Vec<String> = history
        .messages
        .iter()
        .map(|m| format!("{:?}", m.message))
        .collect();
    assert!(texts[1].contains("b1"), "{texts:?}");
    // From now on a refuses that session's batches alone, before they reach the database.
    assert!(a.taken_over(&s).is_some());
    assert!(a.taken_over(&other).is_none());
    a.write(&stale[1..]).await.unwrap();
}

#[tokio::test]
async fn renewal_keeps_a_lapsed_lease_nobody_took_and_finds_one_that_was_taken() {
    let Some((a, b)) = two_daemons().await else {
        return;
    };
    let kept = SessionId::new("s_kept");
    let taken = SessionId::new("s_taken");
    a.lease(&kept).await.unwrap();
    a.lease(&taken).await.unwrap();
    lapse(&a, &kept).await;
    lapse(&a, &taken).await;
    b.lease(&taken).await.unwrap();
    keeper(&a).renew(&a.leases).await.unwrap();
    assert!(b.lease(&kept).await.is_err(), "renewed: still a's");
    assert!(a.taken_over(&kept).is_none());
    assert!(a.taken_over(&taken).is_some(), "the renewal found it taken");
    let client = a.pool.get().await.unwrap();
    let alive: i64 = client
        .query_one(
            "SELECT count(*) FROM daemons WHERE id = $1",
            &[&a.node().unwrap()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(alive, 1, "the renewal says the daemon is alive");
}

fn answer(token: &str) -> Relay {
    Relay::Answer {
        token: token.into(),
        from: "d_a".into(),
        request_id: "apr_1".into(),
        approved: true,
        always: false,
        reason: None,
        by: "ryvos approve".into(),
    }
}

/// The next relayed message `changes` hears within a second.
async fn heard(changes: &mut broadcast::Receiver<Change>) -> Option<Relay> {
    let next = async {
        loop {
            if let Ok(Change::Relay(relay)) = changes.recv().await {
                return relay;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(1), next)
        .await
        .ok()
}

#[tokio::test]
async fn only_stored_messages_are_relayed_and_each_once() {
    let Some((a, b)) = two_daemons().await else {
        return;
    };
    let mut changes = b.changes().unwrap();
    // Until b's listener is listening.
    let mut listening = false;
    for _ in 0..30 {
        a.relay(&answer("probe")).await.unwrap();
        if heard(&mut changes).await.is_some() {
            listening = true;
            break;
        }
    }
    assert!(listening, "b hears what a relays");
    while heard(&mut changes).await.is_some() {}
    let client = a.pool.get().await.unwrap();
    // Anyone who can connect may NOTIFY: a message in the notification itself, or an id that
    // names no stored message, is not heard.
    let forged = serde_json::to_string(&answer("forged")).unwrap();
    for payload in [forged.as_str(), "999999999", "not an id"] {
        notify(&client, payload).await;
    }
    // Nor do ids notified ahead of their messages keep those messages from being heard.
    let last = last_relayed(&client).await;
    for ahead in last + 1..last + 4 {
        notify(&client, &ahead.to_string()).await;
    }
    a.relay(&answer("real")).await.unwrap();
    assert_eq!(heard(&mut changes).await, Some(answer("real")));
    // A stored message's id notified again is not heard again.
    notify(&client, &last_relayed(&client).await.to_string()).await;
    a.relay(&answer("after")).await.unwrap();
    assert_eq!(heard(&mut changes).await, Some(answer("after")));
}

/// Notifies the relay channel straight from SQL, as any role that can connect may.
async fn notify(client: &tokio_postgres::Client, payload: &str) {
    client
        .execute("SELECT pg_notify('ryvos_relay', $1)", &[&payload])
        .await
        .unwrap();
}

/// The id of the last message stored for relaying.
async fn last_relayed(client: &tokio_postgres::Client) -> i64 {
    client
        .query_one("SELECT max(id) FROM relayed", &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn a_claimed_runs_session_starts_on_the_claims_lease_and_learns_it_changed_hands() {
    let Some((a, b)) = two_daemons().await else {
        return;
    };
    let s = SessionId::new("s_claimed");
    // b ran the session last: a's run must load what b wrote.
    b.lease(&s).await.unwrap();
    b.write(&[WriteBatch::of(s.clone(), [message(0, 1, "b0".into())])])
        .await
        .unwrap();
    b.release(&s).await.unwrap();
    let run = ryvos_protocol::records::QueuedRun {
        id: crate::ids::QueuedRunId::generate(),
        session_id: s.clone(),
        params: ryvos_protocol::socket::RunParams::new("go on", "/w"),
        state: ryvos_protocol::records::QueueState::Queued,
        owner: None,
        attempts: 0,
        submitted_at_ms: crate::store::now_ms(),
        started_at_ms: None,
        ended_at_ms: None,
        outcome: None,
    };
    a.submit_run(&run).await.unwrap();
    assert_eq!(a.claim_runs(1).await.unwrap().len(), 1);
    let started = a.lease(&s).await.unwrap();
    assert!(started.changed_hands, "{started:?}");
    // b's taking was the first generation, the claim's the second; starting took none.
    assert_eq!(started.generation, 2, "{started:?}");
    // The claim's lease was the session's: the next taking is the first since.
    let next = a.lease(&s).await.unwrap();
    assert!(!next.changed_hands, "{next:?}");
    assert_eq!(
        next.generation,
        started.generation + 1,
        "{started:?} {next:?}"
    );
}

#[tokio::test]
async fn credentials_keep_their_contract() {
    let Some(store) = store().await else { return };
    crate::store::credential_checks::credentials_keep_their_contract(&store).await;
}
