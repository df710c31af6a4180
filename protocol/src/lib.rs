//! Ryvos's plain data, shared by the engine, the daemon, its clients and host applications:
//! ids, the conversation's messages, the events a run publishes and every payload they carry
//! (safety tiers, goals and criteria, verdicts, plans), the records the store keeps, and the socket protocol between `ryvosd` and its clients.
//!
//! This crate depends on nothing else of Ryvos, so the engine, the socket protocol and any
//! client can share these types without depending on each other. What the types serialize to
//! is the public contract.

pub mod asked;
pub mod effect;
pub mod event;
pub mod goal;
pub mod hook;
pub mod ids;
pub mod mcp;
pub mod message;
pub mod plan;
pub mod records;
pub mod report;
pub mod run_params;
pub mod socket;
pub mod tier;
pub mod verdict;

pub use event::{BudgetScope, Event, EventKind, GuardianAction, RunOutcome, RunStatus, StallPhase};
pub use goal::{Constraints, Criterion, CriterionKind, CriterionOrigin, CriterionResult, Goal};
pub use ids::{CallId, RunId, SessionId};
pub use message::{Message, ToolCall};
pub use plan::{Plan, Step, StepEvent};
pub use tier::SafetyTier;
pub use verdict::{Judgement, Verdict};
