//! The socket calls that take a session back to a point, or fork it there.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `rewind`'s parameters: the session, and where to: one of `turn`, `run`, `undo`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RewindParams {
    pub session: String,
    /// Right after this turn, as `history` numbers them (from 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// Just before this run (`r_…`) started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// Back to before the session's last rewind.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undo: bool,
}

/// `rewind`'s result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RewindResult {
    pub session_id: String,
    /// Where the session went: `turn 7`, `before run r_…`, `before the rewind to turn 7`.
    pub to: String,
    /// How many messages the model's window holds now.
    pub window_messages: u64,
    /// The workspace brought back.
    pub workspace: String,
    pub files_written: u64,
    pub files_removed: u64,
    /// The calls made after that point whose effects stay (an MCP tool's, a command that
    /// could reach beyond the workspace): no rewind of files undoes them.
    pub not_undone: Vec<String>,
}

/// `fork`'s parameters: the session, the point (`turn` or `run`), and where the copy goes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkParams {
    pub session: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// A new or empty directory for the fork's files (absolute); by default
    /// `<workspace>-fork-<id>` beside the original.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
}

/// `fork`'s result: the new session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ForkResult {
    pub session_id: String,
    pub forked_from: String,
    /// Where in the original: `turn 7`, `before run r_…`.
    pub at: String,
    /// Where the fork's files are.
    pub workspace: String,
    /// How many paths were copied.
    pub files: u64,
}

/// A turn as `history` numbers it, and whether the session can be rewound to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct HistoryTurn {
    /// The session's turns in order, from 1: what `rewind --turn` takes.
    pub turn: u32,
    pub run_id: crate::ids::RunId,
    /// The turn's number within its run.
    pub run_turn: u32,
    /// The turn's last message.
    pub last_seq: u64,
    /// Why a rewind (or fork) to it would be refused; `None` when it can be done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_rewindable: Option<String>,
}
