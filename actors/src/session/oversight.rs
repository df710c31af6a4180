//! What the Guardian and the Judge keep of a run between their looks at it: the Guardian's
//! view (stored with the next batch) and its hints for the next request, the Judge's verdicts
//! and retries. A part of the run's state of its own, with private fields.

use crate::guardian::Hint;
use crate::store::VerdictRecord;
use ryvos_protocol::records::RunWatch;

/// What the Guardian and the Judge keep of a run.
#[derive(Default)]
pub(super) struct Oversight {
    /// The Guardian's view of the run as its last review left it, until it is stored.
    watch: Option<RunWatch>,
    /// The Guardian's hints, put into the conversation before the next model call.
    hints: Vec<Hint>,
    /// The Judge's verdicts so far.
    verdicts: u32,
    /// `Retry` (and unreadable) verdicts so far.
    retries: u32,
    /// Verdicts not yet handed to the store.
    unstored: Vec<VerdictRecord>,
}

impl Oversight {
    /// A review of the Guardian's: its hint for the next request, and its view to store.
    pub(super) fn reviewed(&mut self, hint: Option<Hint>, watch: Option<RunWatch>) {
        self.hints.extend(hint);
        if watch.is_some() {
            self.watch = watch;
        }
    }

    /// The hints for the request being made, taken.
    pub(super) fn take_hints(&mut self) -> Vec<Hint> {
        std::mem::take(&mut self.hints)
    }

    /// Whether the Guardian's view changed since it was last stored.
    pub(super) fn watch_to_store(&self) -> bool {
        self.watch.is_some()
    }

    /// The Guardian's view, taken to be stored.
    pub(super) fn take_watch(&mut self) -> Option<RunWatch> {
        self.watch.take()
    }

    /// The next verdict's number (from 1).
    pub(super) fn next_verdict(&mut self) -> u32 {
        self.verdicts += 1;
        self.verdicts
    }

    /// Keeps `verdict` until it is stored.
    pub(super) fn keep_verdict(&mut self, verdict: VerdictRecord) {
        self.unstored.push(verdict);
    }

    /// The verdicts not yet stored, taken to be.
    pub(super) fn take_verdicts(&mut self) -> Vec<VerdictRecord> {
        std::mem::take(&mut self.unstored)
    }

    /// One more retry; how many so far.
    pub(super) fn retried(&mut self) -> u32 {
        self.retries += 1;
        self.retries
    }
}
