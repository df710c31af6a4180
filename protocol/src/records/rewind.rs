//! The points a session can be taken back to: where its conversation stood and what its
//! workspace held, recorded at every run's start and every turn's end.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A point in a session a rewind or a fork can go back to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RewindPoint {
    /// The window then held the messages from `window_from` up to (not including) `upto`.
    pub window_from: u64,
    pub upto: u64,
    /// The summary that stood before the window then, by its id in the snapshot objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The workspace's files then; `None` when `[rewind] enabled = false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceMark>,
}

/// A snapshot of a workspace's files.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct WorkspaceMark {
    /// The workspace's directory (absolute).
    pub workspace: String,
    /// The snapshot's manifest id, in `$RYVOS_HOME/snapshots`; `None` when none was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// Why the files cannot be brought back to this point (a file over `max_file_mb`, one
    /// that could not be read, no snapshot at all); `None` when they can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unkept: Option<String>,
}

/// A rewind on its way: written before any file changes and cleared with the new window, so
/// that a rewind cut off by a crash is finished by running it again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RewindIntent {
    /// Where the session is going: `turn 7`, `before run r_…`, `the state before the last
    /// rewind`.
    pub label: String,
    pub to: RewindPoint,
    /// Where it was: what `rewind --undo` goes back to.
    pub from: RewindPoint,
    /// It is an undo (`rewind --undo`), which `rewind --undo` again finishes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undoing: bool,
}

/// A session's last rewind: what `rewind --undo` takes it back to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct LastRewind {
    pub label: String,
    pub undo: RewindPoint,
    /// Unix milliseconds.
    pub at_ms: u64,
}
