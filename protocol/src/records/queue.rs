//! The run queue: runs submitted to be run by whichever daemon has room.

use crate::event::RunOutcome;
use crate::ids::{QueuedRunId, SessionId};
use crate::run_params::RunParams;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a queued run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueueState {
    /// Waiting for a daemon with room.
    Queued,
    /// A daemon runs it.
    Running,
    /// It ended: its outcome says how.
    Finished,
    /// Its run parked at a budget (its outcome says why): it is finished once the run is
    /// continued and ends, or stopped.
    Parked,
}

impl QueueState {
    /// The state as the store and the command line write it.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueState::Queued => "queued",
            QueueState::Running => "running",
            QueueState::Finished => "finished",
            QueueState::Parked => "parked",
        }
    }

    /// The state written as [`Self::as_str`] does.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Queued, Self::Running, Self::Finished, Self::Parked]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// A run in the queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
// Closed in the schema: a client may rely on every field being documented.
#[schemars(deny_unknown_fields)]
pub struct QueuedRun {
    pub id: QueuedRunId,
    /// The session it runs in (a new one, unless the submission named one).
    pub session_id: SessionId,
    /// What was submitted.
    pub params: RunParams,
    pub state: QueueState,
    /// The daemon running it (or that ran it last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// How many times a daemon claimed it: more than one after a takeover, a daemon's stop,
    /// or a database outage that failed it.
    pub attempts: u32,
    pub submitted_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<u64>,
    /// How it ended, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<RunOutcome>,
}
