//! Guardrails around model calls: a before-block means the model is never called, a transform
//! changes what is sent, an after-block keeps the answer out of the history; every block ends
//! the run `blocked` with a `GuardrailTripwire` event.

mod common;

use common::Harness;
use ryvos::protocol::message::Message;
use ryvos::provider::ChatRequest;
use ryvos::{Before, Guardrail};
use ryvos::{EventKind, RunStatus};
use ryvos_testkit::Reply;
use std::sync::Arc;

/// Blocks every request.
struct Closed;

impl Guardrail for Closed {
    fn name(&self) -> &str {
        "closed"
    }
    fn before(&self, _request: &ChatRequest) -> Before {
        Before::Block("no model calls today".into())
    }
}

/// Replaces digits in the latest user message.
struct Redact;

impl Guardrail for Redact {
    fn name(&self) -> &str {
        "redact"
    }
    fn before(&self, request: &ChatRequest) -> Before {
        let mut messages: Vec<Arc<Message>> = request.messages.as_ref().clone();
        if let Some(last) = messages
            .iter_mut()
            .rev()
            .find(|m| matches!(***m, Message::User { .. }))
        {
            if let Message::User { content } = last.as_ref() {
                let redacted: String = content
                    .chars()
                    .map(|c| if c.is_ascii_digit() { '#' } else { c })
                    .collect();
                *last = Arc::new(Message::user(redacted));
            }
        }
        Before::Transform(ChatRequest {
            messages: Arc::new(messages),
            ..request.clone()
        })
    }
}

#[tokio::test]
async fn a_before_block_makes_no_model_call_and_ends_the_run_blocked() {
    let h = Harness::start_with(
        vec![Reply::text(&["never"])],
        |_| {},
        |b| b.guardrail(Arc::new(Closed)),
    )
    .await;
    let (events, outcome) = h.run(h.request("hello")).await;
    assert_eq!(outcome.status, RunStatus::Blocked);
    assert!(outcome.reason.unwrap().contains("no model calls today"));
    assert!(events.iter().any(|e| matches!(
        &e.kind,
        EventKind::GuardrailTripwire { guardrail, stage, .. } if guardrail == "closed" && stage == "before"
    )));
    assert!(h.server.requests().is_empty(), "the model was never called");
}

#[tokio::test]
async fn a_before_guardrail_can_transform_the_request() {
    let h = Harness::start_with(
        vec![Reply::text(&["ok"])],
        |_| {},
        |b| b.guardrail(Arc::new(Redact)),
    )
    .await;
    let (_, outcome) = h.run(h.request("my card is 4111 1111")).await;
    assert_eq!(outcome.status, RunStatus::Completed, "{:?}", outcome.reason);
    let sent = h.server.requests()[0].to_string();
    assert!(
        sent.contains("my card is #### ####") && !sent.contains("4111"),
        "{sent}"
    );
}

#[tokio::test]
async fn an_after_block_keeps_the_answer_out_of_the_history() {
    let h = Harness::start(
        vec![Reply::text(&["The SECRET is 42."]), Reply::text(&["Fine."])],
        |c| c.guardrails.block_output = vec!["SECRET".into()],
    )
    .await;
    let (events, first) = h.run(h.request("tell me")).await;
    assert_eq!(first.status, RunStatus::Blocked);
    assert!(events.iter().any(|e| matches!(
        &e.kind,
        EventKind::GuardrailTripwire { stage, .. } if stage == "after"
    )));
    let again = h.request("go on").session(first.session_id.clone());
    let (_, second) = h.run(again).await;
    assert_eq!(second.status, RunStatus::Completed, "{:?}", second.reason);
    let next = h.server.requests()[1].to_string();
    assert!(
        !next.contains("SECRET"),
        "the blocked answer is not in the history: {next}"
    );
}

#[tokio::test]
async fn a_configured_input_pattern_blocks_before_the_model_is_called() {
    let h = Harness::start(vec![Reply::text(&["never"])], |c| {
        c.guardrails.block_input = vec!["(?i)password".into()];
    })
    .await;
    let (_, outcome) = h.run(h.request("what is the admin PASSWORD?")).await;
    assert_eq!(outcome.status, RunStatus::Blocked);
    assert!(h.server.requests().is_empty());
}
