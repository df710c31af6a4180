//! The security gate: every tool call gets a tier (T0 read-only … T4 critical) and a decision
//! from the `[security]` policy (allow, ask, deny); asked calls wait for a person's answer,
//! never for ever; every decision is audited.

pub(crate) mod approvals;
pub(crate) mod classify;
mod effect;
pub(crate) mod gate;
mod hook_records;
mod hooked;
mod recovered;
pub(crate) mod shell;
mod wording;

pub(crate) use approvals::{Answer, Answered};
pub use approvals::{ApprovalError, Approvals};
pub(crate) use effect::effect_of;
pub(crate) use gate::{Gate, Refused};
pub(crate) use hooked::{input_that_ran, recorded as recorded_hooks};
