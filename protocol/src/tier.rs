//! Safety tiers: how much harm a tool call can do.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How much harm a call can do, from T0 (reads only) to T4 (critical).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum SafetyTier {
    /// Reads only; no effect outside the process.
    T0,
    /// Small, local, easily undone effects.
    T1,
    /// Changes files in the workspace.
    T2,
    /// Runs programs.
    T3,
    /// Could do lasting damage.
    T4,
}

impl SafetyTier {
    /// True for every tier above T0: the call may change something, so the turn that asked for
    /// it must be durable before it runs.
    pub fn has_side_effects(self) -> bool {
        self > SafetyTier::T0
    }
}
