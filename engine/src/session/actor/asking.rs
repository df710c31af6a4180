//! Questions to sibling actors (the ledger, the Guardian) asked off the session's mailbox: the
//! question runs as its own task and its answer comes back as a message. A slow ledger or
//! Guardian therefore never holds up anything else the session is sent (an interrupt, a cancel,
//! a commit confirmation); every question is bounded by its actor's patience.

use super::SessionMsg;
use ractor::ActorRef;
use std::future::Future;

/// Asks `question` and sends its answer to `myself` as `answer` makes it.
pub(super) fn ask<T: Send + 'static>(
    myself: &ActorRef<SessionMsg>,
    question: impl Future<Output = T> + Send + 'static,
    answer: impl FnOnce(T) -> SessionMsg + Send + 'static,
) {
    let me = myself.clone();
    tokio::spawn(async move {
        let reply = question.await;
        if me.cast(answer(reply)).is_err() {
            tracing::debug!("an answer arrived for a session that has stopped");
        }
    });
}
