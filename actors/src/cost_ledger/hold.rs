//! Test hook: a ledger whose answers of one kind (budget checks or usage receipts) wait on a
//! signal, to show that a session stays responsive while the ledger is slow.

use tokio::sync::{mpsc, watch};

/// Which of the ledger's answers a [`LedgerHold`] holds back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LedgerAnswer {
    /// Whether a run may begin (asked at each run's start).
    BudgetCheck,
    /// The receipt for a model call's usage.
    Receipt,
}

/// Held by the test: while it is not released, the ledger's answers of one kind wait.
pub struct LedgerHold {
    release: watch::Sender<bool>,
    arrived: mpsc::UnboundedReceiver<()>,
}

/// The ledger's side of a [`LedgerHold`].
pub(crate) struct Held {
    pub(crate) answer: LedgerAnswer,
    release: watch::Receiver<bool>,
    arrived: mpsc::UnboundedSender<()>,
}

/// A hold and the ledger's side of it.
pub(crate) fn hold(answer: LedgerAnswer) -> (LedgerHold, Held) {
    let (release_tx, release_rx) = watch::channel(false);
    let (arrived_tx, arrived_rx) = mpsc::unbounded_channel();
    let hold = LedgerHold {
        release: release_tx,
        arrived: arrived_rx,
    };
    let held = Held {
        answer,
        release: release_rx,
        arrived: arrived_tx,
    };
    (hold, held)
}

impl LedgerHold {
    /// Resolves once the ledger is holding back an answer (`false` if the ledger is gone).
    pub async fn answer_held(&mut self) -> bool {
        self.arrived.recv().await.is_some()
    }

    /// Lets the held answers (and every later one) go.
    pub fn release(self) {
        self.release.send_replace(true);
    }
}

impl Held {
    /// Waits until the hold is released (or dropped), if it holds `answer`.
    pub(crate) async fn wait(&mut self, answer: LedgerAnswer) {
        if answer != self.answer || *self.release.borrow() {
            return;
        }
        if self.arrived.send(()).is_err() {
            tracing::debug!("a held ledger answer: the test no longer listens");
        }
        // A dropped hold releases too.
        if self.release.wait_for(|released| *released).await.is_err() {
            tracing::debug!("the ledger's hold was dropped: its answers go");
        }
    }
}
