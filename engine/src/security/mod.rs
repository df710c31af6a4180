//! The security gate: every tool call gets a tier (T0 read-only … T4 critical) and a decision
//! from the `[security]` policy (allow, ask, deny); asked calls wait for a person's answer,
//! never for ever; every decision is audited.

pub mod approvals;
pub mod classify;
pub mod gate;
pub mod shell;

pub use approvals::{Answer, Answered, ApprovalError, Approvals, PendingApproval};
pub use classify::Classification;
pub use gate::{Gate, Refused};
