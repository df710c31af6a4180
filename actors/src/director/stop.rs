//! How a Director run is stopped from outside: `cancel` or `interrupt` on its session reaches
//! the Director through its [`StopSignal`], and the Director passes the stop on to every run
//! it has in flight (its own planning or answer, its steps), then ends as they did.

use crate::event::RunStatus;
use std::sync::Arc;
use tokio::sync::watch;

/// Why a Director run is to stop: `Cancelled` for good, or `Interrupted` (resumable).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Stop {
    pub status: RunStatus,
    pub reason: String,
}

/// A stop asked of one Director run. The first one asked wins, except that a cancel overrides
/// an interrupt (a second Ctrl-C, or `ryvos cancel` on a run already pausing).
#[derive(Clone)]
pub(crate) struct StopSignal(Arc<watch::Sender<Option<Stop>>>);

impl Default for StopSignal {
    fn default() -> Self {
        Self(Arc::new(watch::channel(None).0))
    }
}

impl StopSignal {
    /// Asks the run to stop with `status`, unless the same or a firmer stop was already asked.
    pub(crate) fn stop(&self, status: RunStatus, reason: impl Into<String>) {
        self.0.send_if_modified(|asked| {
            let firmer = status == RunStatus::Cancelled
                && asked
                    .as_ref()
                    .is_some_and(|a| a.status == RunStatus::Interrupted);
            if asked.is_some() && !firmer {
                return false;
            }
            *asked = Some(Stop {
                status,
                reason: reason.into(),
            });
            true
        });
    }

    /// The stop asked, if one was.
    pub(crate) fn requested(&self) -> Option<Stop> {
        self.0.borrow().clone()
    }

    /// Calls `pass_on` with every stop asked, the one already asked first; never returns.
    pub(crate) async fn each<F: std::future::Future<Output = ()>>(
        &self,
        mut pass_on: impl FnMut(Stop) -> F,
    ) -> std::convert::Infallible {
        let mut watching = self.0.subscribe();
        watching.mark_changed();
        loop {
            // The sender lives as long as `self`: it cannot be dropped while this waits.
            if watching.changed().await.is_err() {
                return std::future::pending().await;
            }
            let asked = watching.borrow_and_update().clone();
            if let Some(stop) = asked {
                pass_on(stop).await;
            }
        }
    }
}
