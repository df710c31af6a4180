//! Interrupts: pausing a run after its current step, to be resumed later.
//!
//! An interrupt is asked for from outside (`ryvos interrupt`, [`crate::Engine::interrupt_run`])
//! or by the host's message callback ([`OnMessage`]), which sees every message a run adds and
//! may interrupt after any of them. The run stops at the next step boundary with status
//! `interrupted`: a model answer already streaming is kept; tool calls not yet started (or
//! waiting for a person's approval) stay pending in the history, and the next run on the
//! session executes them before it asks the model anything.

use crate::message::Message;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Sees each message a run adds (its prompt, the model's answers, each tool result, as it
/// comes) and may interrupt the run after it.
pub type OnMessage = Arc<dyn Fn(&Message, &Interrupter) + Send + Sync>;

/// A run's interrupt switch, shared by everything that works for the run.
#[derive(Clone, Default)]
pub struct Interrupter {
    reason: Arc<Mutex<Option<String>>>,
    requested: CancellationToken,
}

impl Interrupter {
    /// Asks the run to pause after its current step. The first reason given is kept.
    pub fn interrupt(&self, reason: impl Into<String>) {
        let mut slot = self.reason.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(reason.into());
        }
        drop(slot);
        self.requested.cancel();
    }

    /// Why the run was asked to pause, once it was.
    pub fn reason(&self) -> Option<String> {
        self.reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn is_requested(&self) -> bool {
        self.requested.is_cancelled()
    }

    /// Resolves once an interrupt is asked for; for waits that should end at one.
    pub async fn requested(&self) {
        self.requested.cancelled().await
    }
}

/// Hands `message` to the host's callback, if there is one.
pub(crate) fn observe(
    on_message: Option<&OnMessage>,
    message: &Message,
    interrupter: &Interrupter,
) {
    if let Some(hook) = on_message {
        hook(message, interrupter);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_reason_is_kept() {
        let i = Interrupter::default();
        assert!(!i.is_requested());
        i.interrupt("first");
        i.interrupt("second");
        assert!(i.is_requested());
        assert_eq!(i.reason().as_deref(), Some("first"));
    }

    #[test]
    fn clones_share_the_switch() {
        let i = Interrupter::default();
        let seen = i.clone();
        let hook: OnMessage = Arc::new(|m, i| {
            if matches!(m, Message::ToolResult { .. }) {
                i.interrupt("a result came");
            }
        });
        observe(Some(&hook), &Message::user("hi"), &i);
        assert!(!seen.is_requested());
        let result = Message::ToolResult {
            call_id: crate::ids::CallId::new("c1"),
            name: "read".into(),
            content: "x".into(),
            is_error: false,
        };
        observe(Some(&hook), &result, &i);
        assert_eq!(seen.reason().as_deref(), Some("a result came"));
    }
}
