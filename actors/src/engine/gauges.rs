//! The gauges the engine reports while telemetry is on: runs in flight, approval requests
//! waiting for an answer, and the depth of the shared run queue.
//!
//! The exporter reads gauges on its own thread, which must not wait on the network; so the
//! queue's depth, which is asked of the store, is sampled by a task of its own and the gauge
//! reports the latest sample.

use crate::security::Approvals;
use crate::session::RunsInFlight;
use crate::store::Store;
use crate::telemetry::Telemetry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often the queue's depth is asked of the store.
const QUEUE_SAMPLE_EVERY: Duration = Duration::from_secs(15);

/// No sample yet, or the store has no queue: the gauge reports nothing.
const UNKNOWN: u64 = u64::MAX;

/// Registers the gauges, and samples the queue's depth until `stopped`.
pub(super) fn observe(
    telemetry: &Telemetry,
    in_flight: RunsInFlight,
    approvals: Approvals,
    store: Store,
    stopped: watch::Receiver<bool>,
) {
    telemetry.gauge(
        "ryvos.runs.in_flight",
        "{run}",
        "Runs started and not yet ended in this daemon",
        move || Some(in_flight.count() as u64),
    );
    telemetry.gauge(
        "ryvos.approvals.waiting",
        "{request}",
        "Approval requests waiting for an answer (paused ones too)",
        move || Some(approvals.count() as u64),
    );
    let depth = Arc::new(AtomicU64::new(UNKNOWN));
    let reported = depth.clone();
    telemetry.gauge(
        "ryvos.queue.depth",
        "{run}",
        "Runs waiting in the shared run queue",
        move || Some(reported.load(Ordering::Relaxed)).filter(|d| *d != UNKNOWN),
    );
    tokio::spawn(sample_queue(store, depth, stopped));
}

/// Asks the store for the queue's depth every [`QUEUE_SAMPLE_EVERY`] until `stopped`; ends at
/// once for a store without a queue. A failed sample is reported as unknown (and logged).
async fn sample_queue(store: Store, depth: Arc<AtomicU64>, mut stopped: watch::Receiver<bool>) {
    loop {
        let asked = tokio::time::timeout(QUEUE_SAMPLE_EVERY, store.queue_depth()).await;
        let sample = match asked {
            Ok(Ok(Some(queued))) => queued,
            Ok(Ok(None)) => return,
            Ok(Err(e)) => {
                tracing::debug!("sampling the run queue's depth: {e}");
                UNKNOWN
            }
            Err(_) => {
                tracing::debug!("sampling the run queue's depth: the store did not answer");
                UNKNOWN
            }
        };
        depth.store(sample, Ordering::Relaxed);
        tokio::select! {
            _ = tokio::time::sleep(QUEUE_SAMPLE_EVERY) => {}
            _ = stopped.wait_for(|stopped| *stopped) => return,
        }
    }
}
