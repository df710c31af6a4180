//! What the Guardian knows of a run in flight: small and bounded (a streak, not a window of
//! calls), stored with the turn that changed it so that a restarted Guardian goes on where it
//! stood.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The Guardian's view of a run in flight.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunWatch {
    pub streak: Option<Streak>,
    /// Steps taken against the current streak: 1 hinted, 2 hinted strongly.
    pub doom_steps: u8,
    /// Steps taken against stalled tools since the last progress.
    pub stall_steps: u8,
    /// Model calls cut for silence since the last answered one.
    pub model_stalls: u8,
    pub tokens_warned: bool,
}

/// The latest run of identical calls: the same tool, input and result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Streak {
    pub tool: String,
    /// The tool's name and canonical input, hashed.
    pub fingerprint: u64,
    /// The result, hashed.
    pub outcome: u64,
    /// True when every call of the streak failed.
    pub failed: bool,
    pub count: u32,
}
