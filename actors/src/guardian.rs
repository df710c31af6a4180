//! The Guardian's messages: what it will be told about every run and how it answers.
//!
//! The GuardianActor (doom loops, stalls, token and dollar budgets) is not started yet; the
//! session loop does not consult it. These types fix its interface for the loop.

use crate::ids::{RunId, SessionId};
use ractor::RpcReplyPort;

/// What the Guardian decides after looking at a run.
#[derive(Clone, Debug, PartialEq)]
pub enum GuardianVerdict {
    /// Nothing to do.
    Proceed,
    /// Inject this corrective hint into the conversation.
    Hint(String),
    /// Stop the run after the current turn, for this reason.
    Stop(String),
}

/// Messages of the GuardianActor.
pub enum GuardianMsg {
    /// A tool call finished: its fingerprint feeds doom-loop detection.
    ToolCallFinished {
        session_id: SessionId,
        run_id: RunId,
        tool: String,
        input_hash: u64,
        is_error: bool,
    },
    /// A turn ended; the Guardian answers what the loop should do before the next one.
    TurnEnded {
        session_id: SessionId,
        run_id: RunId,
        context_tokens: u64,
        reply: RpcReplyPort<GuardianVerdict>,
    },
    /// The run ended; forget it.
    RunEnded { run_id: RunId },
}
