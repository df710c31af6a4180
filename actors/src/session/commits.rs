//! What a session has handed to the store, and what of it is durable.
//!
//! Batches are committed in the order they are handed over (one queue to one writer), so a
//! count of each is enough to know when everything submitted is on disk. Confirmations come
//! back on a channel of the session's own, which its run's driver listens to while it waits.

use crate::callback::Callback;
use crate::checkpoint::CommitNotify;
use crate::store::StoreError;
use std::collections::VecDeque;
use tokio::sync::mpsc;

type Confirmed = Result<(), StoreError>;

/// A session's commits in flight.
pub(super) struct Commits {
    confirmations: mpsc::UnboundedReceiver<Confirmed>,
    confirm: mpsc::UnboundedSender<Confirmed>,
    submitted: u64,
    durable: u64,
    /// Turns whose checkpoint rides in batch N, to report `CheckpointSaved` once it is durable.
    pending_turns: VecDeque<(u64, u32)>,
    error: Option<StoreError>,
}

/// What one confirmation changed.
#[derive(Debug, Default)]
pub(super) struct Confirmation {
    /// Turns now durable, in order.
    pub durable_turns: Vec<u32>,
    /// The error, when this batch failed.
    pub failure: Option<StoreError>,
}

impl Default for Commits {
    fn default() -> Self {
        let (confirm, confirmations) = mpsc::unbounded_channel();
        Self {
            confirmations,
            confirm,
            submitted: 0,
            durable: 0,
            pending_turns: VecDeque::new(),
            error: None,
        }
    }
}

impl Commits {
    /// A batch is handed to the store, carrying the checkpoint of `turn` if any: what to tell
    /// when it is durable (or lost with a failed writer).
    pub(super) fn submitted(&mut self, turn: Option<u32>) -> CommitNotify {
        self.submitted += 1;
        if let Some(turn) = turn {
            self.pending_turns.push_back((self.submitted, turn));
        }
        let confirm = self.confirm.clone();
        Callback::new(
            move |result: Confirmed| {
                // Nobody listens once the session is gone (hibernated, or failed and reloading
                // from the store): a failure is still said, a success needs no one.
                if let Err(unheard) = confirm.send(result) {
                    if let Err(e) = unheard.0 {
                        tracing::warn!("a commit failed after its session had gone: {e}");
                    }
                }
            },
            || Err(crate::checkpoint::writer_gone()),
        )
    }

    /// The next confirmation, when one comes (never while nothing is unconfirmed).
    pub(super) async fn next(&mut self) -> Confirmed {
        if self.all_confirmed() {
            return std::future::pending().await;
        }
        match self.confirmations.recv().await {
            Some(result) => result,
            // Unreachable while `self` holds a sender.
            None => Err(crate::checkpoint::writer_gone()),
        }
    }

    /// A confirmation already in, if any.
    pub(super) fn try_next(&mut self) -> Option<Confirmed> {
        self.confirmations.try_recv().ok()
    }

    /// The oldest unconfirmed batch was committed, or failed.
    pub(super) fn confirmed(&mut self, result: Result<(), StoreError>) -> Confirmation {
        self.durable += 1;
        let mut confirmation = Confirmation::default();
        if let Err(e) = result {
            // Nothing after a failure can be trusted to be on disk.
            self.pending_turns.clear();
            self.error.get_or_insert(e.clone());
            confirmation.failure = Some(e);
        }
        while let Some(&(batch, turn)) = self.pending_turns.front() {
            if batch > self.durable {
                break;
            }
            self.pending_turns.pop_front();
            confirmation.durable_turns.push(turn);
        }
        confirmation
    }

    /// Records a failure found some other way (a confirmation that never came).
    pub(super) fn failed(&mut self, error: StoreError) {
        self.error.get_or_insert(error);
    }

    /// True when every submitted batch has been confirmed.
    pub(super) fn all_confirmed(&self) -> bool {
        self.durable >= self.submitted
    }

    /// The first failure since the last call, if any.
    pub(super) fn take_error(&mut self) -> Option<StoreError> {
        self.error.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_become_durable_in_order_and_failures_are_kept_until_taken() {
        let mut c = Commits::default();
        for turn in [None, Some(1), Some(2)] {
            // Not handed to a writer: the test confirms by hand.
            drop(c.submitted(turn));
        }
        assert!(!c.all_confirmed());
        assert_eq!(c.confirmed(Ok(())).durable_turns, Vec::<u32>::new());
        assert_eq!(c.confirmed(Ok(())).durable_turns, vec![1]);
        let broken = StoreError::from_cause("writing", "disk full");
        let first = c.confirmed(Err(broken.clone()));
        assert!(
            first.durable_turns.is_empty(),
            "a failed batch's turn is not durable"
        );
        assert!(first.failure.is_some());
        assert!(c.all_confirmed());
        drop(c.submitted(Some(3)));
        assert!(c.confirmed(Err(broken)).failure.is_some());
        assert!(c.take_error().is_some());
        assert!(c.take_error().is_none());
    }
}
