//! Runs parked on the month's limit go on by themselves once the month allows it again: when
//! the daemon starts (its limit may have been raised meanwhile) and when the month turns.
//! Nothing polls in between: one timer, set for the month's first instant.

use super::Shared;
use ryvos::protocol::event::ParkReason;
use std::sync::Arc;

/// Starts the task; it ends with the daemon.
pub(super) fn spawn(shared: Arc<Shared>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            continue_month_parks(&shared).await;
            let wait = ryvos::Period::until_next_month(ryvos::shared_store::now_ms());
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = shared.shutdown.cancelled() => return,
            }
        }
    })
}

/// Continues the runs parked on the month's limit, if the month is within it now.
async fn continue_month_parks(shared: &Shared) {
    let runtime = &shared.runtime;
    let parked = match runtime.parked_runs().await {
        Ok(parked) => parked,
        Err(e) => {
            tracing::warn!("listing the runs parked on the month's limit: {e}");
            return;
        }
    };
    let waiting: Vec<_> = (parked.into_iter())
        .filter(|run| run.reason == ParkReason::BudgetMonth)
        .collect();
    if waiting.is_empty() {
        return;
    }
    match runtime.cost_report().await {
        Ok(report) if report.refused_until.is_some() => {
            tracing::info!(
                parked = waiting.len(),
                "runs stay parked: the month is still over its limit"
            );
            return;
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!("reading the month's spending for its parked runs: {e}");
            return;
        }
    }
    for run in waiting {
        match runtime.continue_run(&run.run_id, None).await {
            Ok(handle) => {
                tracing::info!(run = %run.run_id, session = %run.session_id, "a run parked on the month's limit goes on");
                // Followed only to say how it ended; attached clients follow it themselves.
                tokio::spawn(async move {
                    let run = handle.run_id.clone();
                    match handle.outcome().await {
                        Ok(o) => tracing::info!(%run, status = %o.status, "a continued run ended"),
                        Err(e) => tracing::warn!(%run, "a continued run: {e}"),
                    }
                });
            }
            // Another daemon sharing the store may have taken it up first.
            Err(e) => {
                tracing::warn!(run = %run.run_id, "continuing a run parked on the month's limit: {e}")
            }
        }
    }
}
