//! Runs parked on the month's limit go on by themselves once the month allows it again: when
//! the daemon starts (its limit may have been raised meanwhile) and when the month turns.
//! Nothing polls in between: one timer, set for the month's first instant (or, after a continue
//! that failed, for a try again in a minute).

use super::Shared;
use ryvos::protocol::event::ParkReason;
use std::sync::Arc;
use std::time::Duration;

/// How long after a failed continue it is tried again, and how many times in a row.
const RETRY_AFTER: Duration = Duration::from_secs(60);
const RETRIES: u32 = 30;

/// Starts the task; it ends with the daemon.
pub(super) fn spawn(shared: Arc<Shared>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tries = 0;
        loop {
            let failed = continue_month_parks(&shared).await;
            let month_turns = ryvos::Period::until_next_month(ryvos::shared_store::now_ms());
            tries = if failed { tries + 1 } else { 0 };
            let wait = match tries {
                1..=RETRIES => RETRY_AFTER.min(month_turns),
                _ => month_turns,
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = shared.shutdown.cancelled() => return,
            }
        }
    })
}

/// Continues the runs parked on the month's limit, if the month is within it now; whether one
/// of them could not be.
async fn continue_month_parks(shared: &Shared) -> bool {
    let runtime = &shared.runtime;
    let parked = match runtime.parked_runs().await {
        Ok(parked) => parked,
        Err(e) => {
            tracing::warn!("listing the runs parked on the month's limit: {e}");
            return true;
        }
    };
    let waiting: Vec<_> = (parked.into_iter())
        .filter(|run| run.reason == ParkReason::BudgetMonth)
        .collect();
    if waiting.is_empty() {
        return false;
    }
    match runtime.cost_report().await {
        Ok(report) if report.refused_until.is_some() => {
            tracing::info!(
                parked = waiting.len(),
                "runs stay parked: the month is still over its limit"
            );
            return false;
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!("reading the month's spending for its parked runs: {e}");
            return true;
        }
    }
    let mut failed = false;
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
            // Another daemon sharing the store may have taken it up first: then it is not
            // parked any more, and the next look leaves it be.
            Err(e) => {
                tracing::warn!(run = %run.run_id, "continuing a run parked on the month's limit: {e}");
                failed = true;
            }
        }
    }
    failed
}
