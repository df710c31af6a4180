//! What an approval request asks a person.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What an approval request asks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalKind {
    /// Whether the call may run.
    #[default]
    Call,
    /// Whether a call a crash cut off (unsafe to repeat unasked) may run again, with the same
    /// idempotency key; denied, it is recorded as not to be repeated.
    InDoubt,
}

impl ApprovalKind {
    /// Whether it is the usual kind (left out of what is written).
    pub fn is_call(&self) -> bool {
        *self == ApprovalKind::Call
    }
}
