//! Effect classes: what a tool call may do to the world, which decides what becomes of a call
//! a crash cut off (docs/reliability.md).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a call may do, for its recovery after a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Changes nothing: run again.
    ReadOnly,
    /// Safe to repeat with its idempotency key (the far side honours it): run again, same key.
    Idempotent,
    /// The runtime can tell whether it took effect: checked, and run only if it did not.
    Reconcilable,
    /// None of these: in doubt, neither repeated nor left to the model.
    Unsafe,
}

impl Effect {
    /// What a call of `tier` may do when nothing says more: a T0 call only reads; any other
    /// may do anything.
    pub fn of_tier(tier: crate::tier::SafetyTier) -> Self {
        match tier {
            crate::tier::SafetyTier::T0 => Effect::ReadOnly,
            _ => Effect::Unsafe,
        }
    }

    /// The class as configs and events write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::ReadOnly => "read_only",
            Effect::Idempotent => "idempotent",
            Effect::Reconcilable => "reconcilable",
            Effect::Unsafe => "unsafe",
        }
    }
}
