//! Memory through the real loop: entries written with memory_write are found by keyword with
//! memory_search (exact matches first) and recalled into a later session's prompt.

mod common;

use common::Harness;
use ryvos::{EventKind, RunStatus};
use ryvos_testkit::Reply;

fn write(id: &str, content: &str) -> Reply {
    let args = serde_json::json!({ "content": content }).to_string();
    Reply::tool_calls(&[(id, "memory_write", &args)])
}

#[tokio::test]
async fn an_exact_term_match_ranks_above_a_partial_one() {
    let h = Harness::start(
        vec![
            write("w1", "The deploy script is bin/release.sh"),
            write("w2", "The deploy key lives in vault seven"),
            write("w3", "Lunch is at noon on Fridays"),
            Reply::tool_calls(&[(
                "s1",
                "memory_search",
                r#"{"query": "where is the deploy key?"}"#,
            )]),
            Reply::text(&["Found it."]),
        ],
        |_| {},
    )
    .await;
    let (events, outcome) = h.run(h.request("remember and find")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    let found = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolEnd { name, output, .. } if name == "memory_search" => {
                Some(output.clone())
            }
            _ => None,
        })
        .expect("the search's result");
    let lines: Vec<&str> = found.lines().collect();
    assert_eq!(lines.len(), 2, "{found}");
    assert!(lines[0].contains("vault seven"), "{found}");
    assert!(lines[1].contains("bin/release.sh"), "{found}");
    h.server.assert_no_orphans();
}

#[tokio::test]
async fn a_memory_written_in_one_session_is_recalled_in_another() {
    let h = Harness::start(
        vec![
            write("w1", "The staging database password rotates every Monday"),
            Reply::text(&["Saved."]),
            Reply::text(&["It rotates on Mondays."]),
        ],
        |_| {},
    )
    .await;
    let (_, first) = h.run(h.request("remember the rotation")).await;
    assert_eq!(first.status, RunStatus::Completed);
    // A new session: no history in common, only the memory.
    let (_, second) = h
        .run(h.request("when does the staging database password rotate?"))
        .await;
    assert_eq!(second.status, RunStatus::Completed);
    assert_ne!(first.session_id, second.session_id);
    let request = h.server.requests().last().unwrap().clone();
    let system = request["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("Recalled") && system.contains("rotates every Monday"),
        "{system}"
    );
    // The question itself is not recalled as a memory of itself.
    assert_eq!(system.matches("when does the staging").count(), 0);
}

/// Answers `/embeddings` requests with `vector_of` each input (or with a failure).
fn embeddings(failing: bool) -> ryvos_testkit::Router {
    std::sync::Arc::new(move |request: &serde_json::Value| {
        let inputs = request.get("input")?.as_array()?;
        if failing {
            return Some(Reply::error(503, "embeddings are down"));
        }
        let data: Vec<serde_json::Value> = inputs
            .iter()
            .enumerate()
            .map(|(index, text)| {
                serde_json::json!({"index": index, "embedding": vector_of(text.as_str().unwrap_or(""))})
            })
            .collect();
        Some(Reply::json(serde_json::json!({ "data": data })))
    })
}

/// A stand-in embedding: "where" questions point the way "vault" facts do, "release" facts
/// elsewhere.
fn vector_of(text: &str) -> [f32; 2] {
    let text = text.to_lowercase();
    if text.contains("vault") || text.contains("where") {
        [1.0, 0.0]
    } else {
        [0.0, 1.0]
    }
}

/// The search's result, and the run's warnings.
async fn search_with(weights: (f64, f64), failing: bool) -> (String, Vec<String>) {
    let h = Harness::start_routed(
        vec![
            write("w1", "The deploy key is in the release notes"),
            write("w2", "Vault seven holds it"),
            Reply::tool_calls(&[(
                "s1",
                "memory_search",
                r#"{"query": "where is the deploy key"}"#,
            )]),
            Reply::text(&["Done."]),
        ],
        embeddings(failing),
        |c| {
            c.embedding.provider = "openai".into();
            c.embedding.api_key = String::new();
            c.embedding.keyword_weight = weights.0;
            c.embedding.vector_weight = weights.1;
        },
    )
    .await;
    let (events, outcome) = h.run(h.request("remember and find")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    h.server.assert_no_orphans();
    let found = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolEnd { name, output, .. } if name == "memory_search" => {
                Some(output.clone())
            }
            _ => None,
        })
        .expect("the search's result");
    let warnings = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Warning { message } => Some(message.clone()),
            _ => None,
        })
        .collect();
    (found, warnings)
}

#[tokio::test]
async fn hybrid_ranking_follows_the_weights() {
    let (keyword, _) = search_with((1.0, 0.0), false).await;
    assert!(
        keyword.lines().next().unwrap().contains("release notes"),
        "{keyword}"
    );
    let (vector, warnings) = search_with((0.0, 1.0), false).await;
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(
        vector.lines().next().unwrap().contains("Vault seven"),
        "{vector}"
    );
    assert!(!vector.contains("note:"), "{vector}");
}

#[tokio::test]
async fn failing_embeddings_are_said_not_silently_dropped() {
    let (out, warnings) = search_with((0.3, 0.7), true).await;
    // The recall at the run's start said so too, as an event.
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("embeddings are configured but failed")),
        "{warnings:?}"
    );
    assert!(
        out.lines().next().unwrap().contains("release notes"),
        "{out}"
    );
    assert!(
        out.contains("note: embeddings are configured but failed") && out.contains("keyword-only"),
        "{out}"
    );
}

#[tokio::test]
async fn a_memory_written_while_embeddings_were_down_is_still_recalled() {
    let up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let switch = up.clone();
    let router: ryvos_testkit::Router = std::sync::Arc::new(move |request: &serde_json::Value| {
        let healthy = switch.load(std::sync::atomic::Ordering::SeqCst);
        embeddings(!healthy)(request)
    });
    let h = Harness::start_routed(
        vec![
            write("w1", "The staging database password rotates every Monday"),
            Reply::text(&["Saved."]),
            Reply::text(&["It rotates on Mondays."]),
        ],
        router,
        |c| {
            c.embedding.provider = "openai".into();
            c.embedding.api_key = String::new();
        },
    )
    .await;
    // Stored without a vector.
    let (_, first) = h.run(h.request("remember the rotation")).await;
    assert_eq!(first.status, RunStatus::Completed, "{:?}", first.reason);
    up.store(true, std::sync::atomic::Ordering::SeqCst);
    let (events, second) = h
        .run(h.request("when does the staging database password rotate?"))
        .await;
    assert_eq!(second.status, RunStatus::Completed, "{:?}", second.reason);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Warning { .. })),
        "the embeddings answered the recall"
    );
    let request = h.server.requests().last().unwrap().clone();
    let system = request["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("rotates every Monday"), "{system}");
}
