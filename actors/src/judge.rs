//! The Judge's messages: how a goal-driven run will be evaluated.
//!
//! The JudgeActor is not started yet; goal-driven runs are not offered. These types fix its
//! interface for the loop.

use crate::ids::RunId;
use ractor::RpcReplyPort;

/// The Judge's decision about a goal-driven run.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The goal is met: stop, status `completed`.
    Accept { reason: String },
    /// Not met: continue with this hint.
    Retry { hint: String },
    /// Cannot be met: stop, status `escalated`.
    Escalate { reason: String },
    /// In progress.
    Continue,
}

/// Messages of the JudgeActor.
pub enum JudgeMsg {
    /// Evaluate the run's latest answer against its goal.
    Evaluate {
        run_id: RunId,
        answer: String,
        reply: RpcReplyPort<Verdict>,
    },
}
