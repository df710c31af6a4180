//! The security gate: every tool call gets a tier (T0 read-only … T4 critical) and a decision
//! from the `[security]` policy (allow, ask, deny).

pub mod classify;
pub mod shell;

pub use classify::Classification;
