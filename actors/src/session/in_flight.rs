//! The count of runs in flight, kept by the session supervisor.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// How many runs are in flight, readable outside the supervisor (a daemon claims from the run
/// queue only what room is left).
#[derive(Clone, Debug, Default)]
pub(crate) struct RunsInFlight(Arc<AtomicUsize>);

impl RunsInFlight {
    pub(crate) fn count(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    pub(super) fn add(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn remove(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }

    pub(super) fn reset(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}
