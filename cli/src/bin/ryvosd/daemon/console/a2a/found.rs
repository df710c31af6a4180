//! A task's run, found from its id: the run and session the id names, the run's record in the
//! store, and whether a call of it waits for a person's approval.

use super::refusal::{internal, not_found, Refusal};
use super::tasks::named;
use crate::daemon::console::State;
use ryvos::protocol::records::RunRecord;
use ryvos::PendingApproval;
use ryvos_protocol::ids::RunId;

/// The run a task id names, and whether a call of it waits for approval.
pub(super) async fn found(state: &State, task: &str) -> Result<(RunRecord, bool), Refusal> {
    let record = record(state, task).await?;
    let waiting = !waiting(state, &record.run_id).await.is_empty();
    Ok((record, waiting))
}

/// The record of the run a task id names: the task exists.
pub(super) async fn record(state: &State, task: &str) -> Result<RunRecord, Refusal> {
    let missing = || not_found(task);
    let (run, session) = named(task).ok_or_else(missing)?;
    // The session's run records alone: its messages are not read.
    let runs = (state
        .shared
        .runtime
        .shared_store()
        .session_runs(&session)
        .await)
        .map_err(|e| internal(e.to_string()))?;
    runs.into_iter()
        .find(|r| r.run_id == run)
        .ok_or_else(missing)
}

/// The approval requests run `run`'s calls wait on.
pub(super) async fn waiting(state: &State, run: &RunId) -> Vec<PendingApproval> {
    let pending = crate::daemon::approvals::pending(&state.shared).await;
    pending.into_iter().filter(|p| p.run_id == *run).collect()
}
