//! A task's run, found from its id: the run and session the id names, the run's record in the
//! store, and whether a call of it waits for a person's approval.

use super::refusal::{internal, not_found, Refusal};
use super::tasks::named;
use crate::daemon::console::State;
use ryvos::protocol::records::RunRecord;

/// The run a task id names, and whether a call of it waits for approval.
pub(super) async fn found(state: &State, task: &str) -> Result<(RunRecord, bool), Refusal> {
    let missing = || not_found(task);
    let (run, session) = named(task).ok_or_else(missing)?;
    let runtime = &state.shared.runtime;
    // The session's run records alone: its messages are not read.
    let runs = (runtime.shared_store().session_runs(&session).await)
        .map_err(|e| internal(e.to_string()))?;
    let record = runs
        .into_iter()
        .find(|r| r.run_id == run)
        .ok_or_else(missing)?;
    let pending = crate::daemon::approvals::pending(&state.shared).await;
    let waiting = pending.iter().any(|p| p.run_id == run);
    Ok((record, waiting))
}
