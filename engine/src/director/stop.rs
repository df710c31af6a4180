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

/// A stop asked of one Director run; the first one asked wins.
#[derive(Clone)]
pub(crate) struct StopSignal(Arc<watch::Sender<Option<Stop>>>);

impl Default for StopSignal {
    fn default() -> Self {
        Self(Arc::new(watch::channel(None).0))
    }
}

impl StopSignal {
    /// Asks the run to stop with `status`, unless a stop was already asked.
    pub(crate) fn stop(&self, status: RunStatus, reason: impl Into<String>) {
        self.0.send_if_modified(|asked| {
            if asked.is_some() {
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

    /// Resolves once a stop is asked (at once if one was).
    pub(crate) async fn asked(&self) -> Stop {
        let mut watching = self.0.subscribe();
        let asked = watching
            .wait_for(Option::is_some)
            .await
            .map(|asked| asked.clone());
        // The sender lives as long as `self`: it cannot be dropped while this waits.
        asked.ok().flatten().unwrap_or_else(unreachable_stop)
    }
}

fn unreachable_stop() -> Stop {
    Stop {
        status: RunStatus::Cancelled,
        reason: "the Director's stop signal was lost".into(),
    }
}
