//! Compaction keeps exact facts: a summarizer that leaves out an id and a path (as real
//! summaries often do) does not lose them, since the runtime finds them in the summarized
//! part and keeps them verbatim below the summary; a summary that keeps everything gets no
//! block. Every compaction is recorded with what it covered and kept, and the last one can be
//! undone.

mod common;

use common::Harness;
use ryvos::protocol::message::Message;
use ryvos::testing::Inspect;
use ryvos::{EventKind, RunStatus, SessionId};
use ryvos_testkit::{Reply, Router};
use serde_json::Value;
use std::sync::Arc;

const FINGERPRINT: &str = "FP-77A1-QX";
const BUILD: &str = "/srv/builds/heron-42";

/// The transcript a summary request carries, if `request` is one.
fn summary_request(request: &Value) -> Option<String> {
    let asks = request["messages"][0]["content"].as_str()?;
    asks.starts_with("You summarize").then_some(())?;
    request["messages"][1]["content"]
        .as_str()
        .map(str::to_owned)
}

/// A harness whose summaries `summarize` writes from the transcript it is given, with a
/// budget small enough for reading the secrets and `pages` pages to be compacted (every 20
/// pages or so).
async fn harness(pages: usize, summarize: fn(&str) -> String, after: Vec<Reply>) -> Harness {
    let mut script = vec![Reply::tool_calls(&[(
        "s1",
        "read",
        r#"{"path": "secrets.txt"}"#,
    )])];
    script.extend(Reply::reads_then(pages, "page", "All read."));
    script.extend(after);
    let router: Router = Arc::new(move |request: &Value| {
        summary_request(request).map(|transcript| Reply::text(&[&summarize(&transcript)]))
    });
    let h = with_secrets(script, router).await;
    for i in 0..pages {
        let text = format!("page {i}: {}", "the quick brown fox jumps ".repeat(20));
        std::fs::write(h.workspace.path().join(format!("page{i}.txt")), text).unwrap();
    }
    h
}

/// A harness answering from `script` and `router`, with a 3,000-token budget and the secrets
/// file in its workspace.
async fn with_secrets(script: Vec<Reply>, router: Router) -> Harness {
    let h = Harness::start_routed(script, router, |c| {
        c.agent.max_context_tokens = 3000;
        c.agent.max_turns = 100;
    })
    .await;
    let secrets =
        format!("The deploy key fingerprint is {FINGERPRINT} and the build lives at {BUILD}.");
    std::fs::write(h.workspace.path().join("secrets.txt"), secrets).unwrap();
    h
}

/// The facts each compaction of `events` kept below its summary.
fn kept(events: &[Arc<ryvos::Event>]) -> Vec<Vec<String>> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ContextPruned { facts_kept, .. } => Some(facts_kept.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_facts_a_summary_leaves_out_are_kept_and_reach_the_model() {
    let h = harness(
        60,
        |_| "Some files were read.".to_owned(),
        vec![Reply::text(&["The fingerprint is in the context."])],
    )
    .await;
    let (events, outcome) = h.run(h.request("read secrets.txt, then every page")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    let kept = kept(&events);
    assert!(!kept.is_empty(), "the conversation was compacted");
    assert!(kept[0].contains(&FINGERPRINT.to_owned()), "{kept:?}");
    assert!(kept[0].contains(&BUILD.to_owned()), "{kept:?}");

    // The next run, asking for the fingerprint, sends it to the model: in the summary's block,
    // though the summary left it out and the message that said it is out of the window.
    let ask = h.request("What is the deploy key fingerprint?");
    let (_, next) = h.run(ask.session(outcome.session_id.clone())).await;
    assert_eq!(next.status, RunStatus::Completed, "{:?}", next.reason);
    let last = h.server.requests().pop().unwrap();
    let sent = last["messages"].to_string();
    assert!(sent.contains(FINGERPRINT) && sent.contains(BUILD), "{sent}");
    assert!(
        !sent.contains("deploy key fingerprint is"),
        "the original message left the window"
    );
    // A memory note left in the window does not say the conversation is near its budget now:
    // the compaction made room.
    assert!(!sent.contains("The conversation is at"), "{sent}");

    // The store keeps the compaction: what it covered, kept and cost, and what undoing it
    // would restore.
    let stored = h
        .runtime
        .store()
        .load_session(&outcome.session_id)
        .await
        .unwrap();
    let record = stored.compaction.expect("a compaction record");
    assert!(record.facts_kept.contains(&FINGERPRINT.to_owned()));
    assert!(record.first_kept_seq > record.first_seq);
    assert!(record.tokens_after < record.tokens_before);
    assert_eq!(record.model.as_deref(), Some("scripted"));
    assert!(record.previous.is_some());
    // It remembers every compaction before it, for `history` to show each in place.
    assert!(kept.len() >= 2, "several compactions: {kept:?}");
    assert_eq!(record.earlier.len(), kept.len() - 1);
    assert_eq!(record.earlier[0].facts_kept, kept[0]);
    assert_eq!(
        record.earlier.last().unwrap().first_kept_seq,
        record.first_seq
    );

    // Before they left, the memory flush saved them to memory, whatever the model wrote.
    assert!(events
        .iter()
        .any(|e| matches!(e.kind, EventKind::MemoryFlush { .. })));
    let memories = h.runtime.store().memories().await.unwrap();
    assert!(
        memories
            .iter()
            .any(|m| m.content.contains(FINGERPRINT) && m.content.contains(BUILD)),
        "{memories:?}"
    );
    h.server.assert_no_orphans();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_summary_that_keeps_every_fact_gets_no_block() {
    // This summarizer repeats the transcript without the pages' filler: every fact it was
    // given is in it, and it is short.
    // One compaction: a transcript clipped past its pieces' length would lose facts.
    let h = harness(
        30,
        |transcript| transcript.replace("the quick brown fox jumps ", ""),
        Vec::new(),
    )
    .await;
    let (events, outcome) = h.run(h.request("read secrets.txt, then every page")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    let kept = kept(&events);
    assert!(!kept.is_empty(), "the conversation was compacted");
    assert!(kept.iter().all(Vec::is_empty), "{kept:?}");
    let sent = h.server.requests().pop().unwrap()["messages"].to_string();
    assert!(!sent.contains("left out]"), "no block: {sent}");
}

#[tokio::test(flavor = "multi_thread")]
async fn undo_brings_the_last_compactions_messages_back_and_says_when_it_cannot() {
    let h = harness(
        60,
        |_| "Some files were read.".to_owned(),
        vec![
            Reply::text(&["A small session."]),
            Reply::text(&["With the pages back."]),
        ],
    )
    .await;
    let (_, outcome) = h.run(h.request("read secrets.txt, then every page")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    let session = outcome.session_id.clone();
    let last = (h.runtime.store().load_session(&session).await.unwrap())
        .compaction
        .expect("a compaction");

    let undone = h.runtime.undo_compaction(&session).await.unwrap();
    assert_eq!(undone.first_kept_seq, last.first_seq);
    assert!(undone.restored_messages > 0);
    assert!(!undone.fits, "3,000 tokens do not hold the restored window");
    let history = h.runtime.history(&session).await.unwrap().unwrap();
    // Tokens, not bytes: the restored window's text is several characters a token.
    let bytes: usize = (history.messages.iter())
        .filter(|m| m.seq >= undone.first_kept_seq)
        .map(|m| serde_json::to_string(&m.message).unwrap().len())
        .sum();
    assert!(
        undone.context_tokens * 3 < bytes as u64,
        "{} tokens for {bytes} bytes",
        undone.context_tokens
    );
    let restored = history.compaction.expect("the restored window is recorded");
    assert!(restored.undone_at_ms.is_some());
    assert_eq!(restored.first_kept_seq, last.first_seq);

    // Only the last compaction can be undone, and only an existing session's.
    let twice = h.runtime.undo_compaction(&session).await.unwrap_err();
    assert!(twice.to_string().contains("already undone"), "{twice}");
    let (_, small) = h.run(h.request("and a session never compacted")).await;
    let never = h
        .runtime
        .undo_compaction(&small.session_id)
        .await
        .unwrap_err();
    assert!(never.to_string().contains("never compacted"), "{never}");
    let unknown = SessionId::new("s_unknown");
    let missing = h.runtime.undo_compaction(&unknown).await.unwrap_err();
    assert!(
        missing.to_string().contains("there is no session"),
        "{missing}"
    );

    // With a window large enough for them, the next request carries the messages the
    // compaction had taken out, every call with its result.
    let h = h
        .restart_with(|c| c.agent.max_context_tokens = 100_000)
        .await;
    let (_, next) = h.run(h.request("go on").session(session.clone())).await;
    assert_eq!(next.status, RunStatus::Completed, "{:?}", next.reason);
    let sent = h.server.requests().pop().unwrap()["messages"].to_string();
    let stored = h.runtime.store().load_session(&session).await.unwrap();
    let back: Vec<String> = stored
        .messages
        .iter()
        .filter(|m| (last.first_seq..last.first_kept_seq).contains(&m.seq))
        .filter_map(|m| match &*m.message {
            // As the request's JSON writes it.
            Message::ToolResult { content, .. } => {
                let json = serde_json::to_string(content).unwrap();
                Some(json.trim_matches('"').chars().take(40).collect())
            }
            _ => None,
        })
        .collect();
    assert!(!back.is_empty());
    for result in back {
        assert!(sent.contains(&result), "{result} is sent again");
    }
    h.server.assert_no_orphans();
}

#[tokio::test(flavor = "multi_thread")]
async fn thirty_runs_through_many_compactions_keep_the_facts_and_stay_whole() {
    const RUNS: usize = 30;
    const PAGES_PER_RUN: usize = 10;
    let mut script = vec![Reply::tool_calls(&[(
        "s1",
        "read",
        r#"{"path": "secrets.txt"}"#,
    )])];
    for run in 0..RUNS {
        script.extend(Reply::reads_then(
            PAGES_PER_RUN,
            &format!("r{run}p"),
            "Read.",
        ));
    }
    script.push(Reply::text(&["The fingerprint is still there."]));
    let router: Router = Arc::new(|request: &Value| {
        summary_request(request).map(|_| Reply::text(&["Files were read."]))
    });
    let h = with_secrets(script, router).await;
    for run in 0..RUNS {
        for i in 0..PAGES_PER_RUN {
            let text = format!(
                "page {run}/{i}: {}",
                "the quick brown fox jumps ".repeat(20)
            );
            std::fs::write(h.workspace.path().join(format!("r{run}p{i}.txt")), text).unwrap();
        }
    }
    let mut session: Option<SessionId> = None;
    let mut compactions = 0;
    let mut took = Vec::new();
    for run in 0..RUNS {
        let prompt = match run {
            0 => "read secrets.txt, then the pages".to_owned(),
            _ => format!("read the pages of batch {run}"),
        };
        let mut request = h.request(&prompt);
        if let Some(session) = &session {
            request = request.session(session.clone());
        }
        let started = std::time::Instant::now();
        let (events, outcome) = h.run(request).await;
        took.push(started.elapsed());
        assert_eq!(
            outcome.status,
            RunStatus::Completed,
            "run {run}: {:?}",
            outcome.reason
        );
        compactions += kept(&events).len();
        session = Some(outcome.session_id);
    }
    let session = session.unwrap();
    assert!(compactions >= 10, "many compactions: {compactions}");
    // Through every compaction, the facts of the first run reach the model.
    let ask = h
        .request("What is the deploy key fingerprint?")
        .session(session.clone());
    let (_, last) = h.run(ask).await;
    assert_eq!(last.status, RunStatus::Completed, "{:?}", last.reason);
    let sent = h.server.requests().pop().unwrap()["messages"].to_string();
    assert!(sent.contains(FINGERPRINT) && sent.contains(BUILD), "{sent}");
    let record = (h.runtime.store().load_session(&session).await.unwrap())
        .compaction
        .unwrap();
    assert_eq!(record.earlier.len() + 1, compactions);
    h.server.assert_no_orphans();
    // What each run took, first runs and last, for the record (not asserted: timing).
    let mean =
        |runs: &[std::time::Duration]| runs.iter().sum::<std::time::Duration>() / runs.len() as u32;
    eprintln!(
        "{RUNS} runs, {compactions} compactions: the first five took {:?} each on average, the last five {:?}",
        mean(&took[..5]),
        mean(&took[RUNS - 5..])
    );
}

/// A compacted session keeps the server's count of its latest request on its record: the
/// calls after the compaction reported usage (`sessions[].measured`).
#[tokio::test(flavor = "multi_thread")]
async fn a_compacted_session_keeps_the_servers_latest_count() {
    let mut script = vec![Reply::tool_calls(&[(
        "s1",
        "read",
        r#"{"path": "secrets.txt"}"#,
    )])];
    script.extend(Reply::reads_then(30, "page", "All read."));
    let script = script
        .into_iter()
        .map(Reply::prompt_tokens_by_size)
        .collect();
    let router: Router = Arc::new(|request: &Value| {
        summary_request(request).map(|_| Reply::text(&["Pages were read."]))
    });
    let h = with_secrets(script, router).await;
    for i in 0..30 {
        let text = format!("page {i}: {}", "the quick brown fox jumps ".repeat(20));
        std::fs::write(h.workspace.path().join(format!("page{i}.txt")), text).unwrap();
    }
    let (events, outcome) = h.run(h.request("read every page")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    assert!(!kept(&events).is_empty(), "it was compacted");
    let record = h
        .runtime
        .store()
        .session_record(&outcome.session_id)
        .await
        .unwrap()
        .unwrap();
    assert!(record.measured.is_some(), "{record:?}");
}

/// Through the real daemon: `sessions` lists the count of the session's latest request, made
/// after the compaction; a count too small to be the request's (a server counting what it did
/// not cache, say) is not taken for it.
#[tokio::test(flavor = "multi_thread")]
async fn a_compacted_session_is_listed_with_the_servers_latest_count() {
    let measured = listed_count(true).await;
    assert!(measured["tokens"].as_u64() > Some(100), "{measured}");
    assert!(measured["window_start"].as_u64() > Some(0), "{measured}");
    assert_eq!(listed_count(false).await, Value::Null);
}

/// `measured` as `ryvos sessions` lists it after a run that was compacted, on a server that
/// counts requests by their size (`by_size`) or says 12 tokens for each.
async fn listed_count(by_size: bool) -> Value {
    let script =
        Reply::reads_then(30, "page", "All read.")
            .into_iter()
            .map(|reply| match by_size {
                true => reply.prompt_tokens_by_size(),
                false => reply,
            });
    let router: Router = Arc::new(|request: &Value| {
        summary_request(request).map(|_| Reply::text(&["Pages were read."]))
    });
    let server = ryvos_testkit::ScriptedModelServer::start_routed(script, Some(router)).await;
    let home = common::home::Home::new(
        &server,
        "[agent]\nmax_context_tokens = 3000\nmax_turns = 100",
    );
    for i in 0..30 {
        let text = format!("page {i}: {}", "the quick brown fox jumps ".repeat(20));
        std::fs::write(home.workspace.path().join(format!("page{i}.txt")), text).unwrap();
    }
    let daemon = home.daemon().await;
    let workspace = home.workspace.path().to_str().unwrap();
    let (code, out, err) = home
        .ryvos(&["run", "--json", "--workspace", workspace, "read every page"])
        .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"ContextPruned\""), "it was compacted: {out}");
    let (code, out, err) = home.ryvos(&["sessions", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let sessions: Value = serde_json::from_str(out.trim()).unwrap();
    home.shutdown(daemon).await;
    sessions[0]["measured"].clone()
}
