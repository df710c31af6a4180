//! Approvals waiting for a person: each call the policy asks about is registered here until it
//! is answered (`ryvos approve` / `ryvos deny`, or a host application), times out, or its run
//! ends. Only an answer given here can approve a call: nothing in a model's arguments can.

use crate::ids::{RunId, SessionId};
use crate::tools::SafetyTier;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// A person's answer to an approval request.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub approved: bool,
    pub reason: Option<String>,
    /// Who answered (`ryvos approve`, a host application, …), for the audit.
    pub by: String,
    /// Approve the same call (the same tool; for `bash`, the same command) for the rest of the
    /// session without asking again. Never for a T4 call.
    pub always: bool,
}

/// A request waiting for an answer, as listed to people.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PendingApproval {
    pub request_id: String,
    pub session_id: SessionId,
    pub run_id: RunId,
    pub tool: String,
    pub input: serde_json::Value,
    pub tier: SafetyTier,
    pub asked_at_ms: u64,
}

struct Waiting {
    shown: PendingApproval,
    answer: oneshot::Sender<Answer>,
}

/// Why an answer was not taken.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ApprovalError {
    #[error("no approval request '{0}' is waiting (it was answered, timed out, or its run ended)")]
    NotWaiting(String),
}

/// The requests waiting, shared by the gate and whoever answers.
#[derive(Clone, Default)]
pub struct Approvals(Arc<Mutex<HashMap<String, Waiting>>>);

impl Approvals {
    /// Registers `request`; the receiver gets its answer.
    pub fn open(&self, request: PendingApproval) -> oneshot::Receiver<Answer> {
        let (answer, receiver) = oneshot::channel();
        let id = request.request_id.clone();
        self.lock().insert(
            id,
            Waiting {
                shown: request,
                answer,
            },
        );
        receiver
    }

    /// Answers request `id`.
    pub fn answer(&self, id: &str, answer: Answer) -> Result<(), ApprovalError> {
        let waiting = self
            .lock()
            .remove(id)
            .ok_or_else(|| ApprovalError::NotWaiting(id.to_owned()))?;
        // The waiter may have given up a moment ago: then the answer is no longer wanted.
        waiting
            .answer
            .send(answer)
            .map_err(|_| ApprovalError::NotWaiting(id.to_owned()))
    }

    /// Withdraws request `id` (it timed out, or its run ended).
    pub fn withdraw(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Every request waiting, oldest first.
    pub fn pending(&self) -> Vec<PendingApproval> {
        let mut all: Vec<PendingApproval> = self.lock().values().map(|w| w.shown.clone()).collect();
        all.sort_by_key(|p| p.asked_at_ms);
        all
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        // A panic while holding the map cannot leave it half-changed: take it as it is.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
