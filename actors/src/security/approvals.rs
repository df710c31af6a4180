//! Approvals waiting for a person: each call the policy asks about is registered here until it
//! is answered (`ryvos approve` / `ryvos deny`, or a host application), times out, or its run
//! ends. Only an answer given here can approve a call: nothing in a model's arguments can.
//! A request whose run pauses (an interrupt, a daemon shutdown) is kept, in the store too: it
//! can still be answered, and the session's next run takes the answer or asks again.

use crate::ids::{CallId, SessionId};
pub(crate) use ryvos_protocol::records::{Answer, ApprovalKind, PendingApproval};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

enum Slot {
    /// A call waits for the answer.
    Waiting(oneshot::Sender<Answer>),
    /// The call's run paused; the answer is kept for the next run.
    Paused,
}

struct Entry {
    shown: PendingApproval,
    slot: Slot,
}

/// Why an answer was not taken.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ApprovalError {
    #[error("no approval request '{0}' is waiting (it was answered, timed out, or its run ended)")]
    NotWaiting(String),
    #[error("approval request '{0}' was already answered while its run is paused")]
    AlreadyAnswered(String),
    #[error("the answer to approval request '{0}' is kept until the session resumes, but it could not be stored ({1}): it is lost if the daemon stops first")]
    NotStored(String, String),
}

/// Where an answer went.
#[derive(Debug, PartialEq)]
pub enum Answered {
    /// To the call waiting for it.
    Delivered,
    /// Into a paused request: this record, to be stored, carries it to the session's next run.
    Kept(Box<PendingApproval>),
}

/// The requests waiting, shared by the gate and whoever answers.
#[derive(Clone, Default)]
pub struct Approvals(Arc<Mutex<HashMap<String, Entry>>>);

impl Approvals {
    /// Registers `request`; the receiver gets its answer.
    pub fn open(&self, request: PendingApproval) -> oneshot::Receiver<Answer> {
        let (answer, receiver) = oneshot::channel();
        let id = request.request_id.clone();
        self.lock().insert(
            id,
            Entry {
                shown: PendingApproval {
                    paused: false,
                    answer: None,
                    ..request
                },
                slot: Slot::Waiting(answer),
            },
        );
        receiver
    }

    /// Answers request `id`.
    pub fn answer(&self, id: &str, answer: Answer) -> Result<Answered, ApprovalError> {
        let mut all = self.lock();
        let not_waiting = || ApprovalError::NotWaiting(id.to_owned());
        let entry = all.get_mut(id).ok_or_else(not_waiting)?;
        if let Slot::Paused = entry.slot {
            if entry.shown.answer.is_some() {
                return Err(ApprovalError::AlreadyAnswered(id.to_owned()));
            }
            entry.shown.answer = Some(answer);
            return Ok(Answered::Kept(Box::new(entry.shown.clone())));
        }
        let Some(Entry {
            slot: Slot::Waiting(waiter),
            ..
        }) = all.remove(id)
        else {
            return Err(not_waiting());
        };
        // The waiter may have given up a moment ago: then the answer is no longer wanted.
        waiter
            .send(answer)
            .map(|_| Answered::Delivered)
            .map_err(|_| not_waiting())
    }

    /// Withdraws request `id` (it timed out, or its run ended).
    pub fn withdraw(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Keeps request `id` for the session's next run: its own run paused while it waited.
    /// Returns the record to store.
    pub fn park(&self, id: &str) -> Option<PendingApproval> {
        let mut all = self.lock();
        let entry = all.get_mut(id)?;
        entry.slot = Slot::Paused;
        entry.shown.paused = true;
        Some(entry.shown.clone())
    }

    /// Takes the paused request of `call` (the same tool and input) in `session`, if its run
    /// paused while it waited.
    pub fn take_paused(
        &self,
        session: &SessionId,
        call: &CallId,
        tool: &str,
        input: &serde_json::Value,
    ) -> Option<PendingApproval> {
        let mut all = self.lock();
        let id = all
            .iter()
            .find(|(_, e)| {
                matches!(e.slot, Slot::Paused)
                    && e.shown.session_id == *session
                    && e.shown.call_id == *call
                    && e.shown.tool == tool
                    && e.shown.input == *input
            })
            .map(|(id, _)| id.clone())?;
        all.remove(&id).map(|e| e.shown)
    }

    /// Forgets the paused requests of `session` whose calls are not in `pending`; returns
    /// their ids.
    pub fn drop_paused(&self, session: &SessionId, pending: &[CallId]) -> Vec<String> {
        let mut all = self.lock();
        let stale: Vec<String> = all
            .iter()
            .filter(|(_, e)| {
                matches!(e.slot, Slot::Paused)
                    && e.shown.session_id == *session
                    && !pending.contains(&e.shown.call_id)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &stale {
            all.remove(id);
        }
        stale
    }

    /// The calls of `session` whose requests are kept for its next run: they are pending,
    /// never cut off, when the session is loaded again (after a crash too).
    pub fn kept_calls(&self, session: &SessionId) -> Vec<CallId> {
        self.lock()
            .values()
            .filter(|e| matches!(e.slot, Slot::Paused) && e.shown.session_id == *session)
            .map(|e| e.shown.call_id.clone())
            .collect()
    }

    /// Whether `session`'s call `call` waits in doubt (a crash cut it off).
    pub fn in_doubt(&self, session: &SessionId, call: &CallId) -> bool {
        self.lock().values().any(|e| {
            e.shown.kind == ApprovalKind::InDoubt
                && e.shown.session_id == *session
                && e.shown.call_id == *call
        })
    }

    /// The calls of `session` that wait in doubt.
    pub fn in_doubt_calls(&self, session: &SessionId) -> Vec<CallId> {
        (self.lock().values())
            .filter(|e| e.shown.kind == ApprovalKind::InDoubt && e.shown.session_id == *session)
            .map(|e| e.shown.call_id.clone())
            .collect()
    }

    /// Puts back the paused requests read from the store (after a restart).
    pub fn restore(&self, paused: Vec<PendingApproval>) {
        let mut all = self.lock();
        for shown in paused {
            all.insert(
                shown.request_id.clone(),
                Entry {
                    shown: PendingApproval {
                        paused: true,
                        ..shown
                    },
                    slot: Slot::Paused,
                },
            );
        }
    }

    /// How many requests wait for an answer (paused ones too).
    pub fn count(&self) -> usize {
        self.lock().len()
    }

    /// Every request, waiting or paused, oldest first.
    pub fn pending(&self) -> Vec<PendingApproval> {
        let mut all: Vec<PendingApproval> = self.lock().values().map(|e| e.shown.clone()).collect();
        all.sort_by_key(|p| p.asked_at_ms);
        all
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        // A panic while holding the map cannot leave it half-changed: take it as it is.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
