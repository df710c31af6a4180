//! What the store keeps besides messages: one record type per table, plain data whose JSON
//! form is what is on disk (records grow fields with `#[serde(default)]`, never a migration).

mod access;
mod audit;
mod cost;
mod memory;
mod progress;
mod queue;
mod rewind;
mod session;
mod verdict;
mod watch;

pub use crate::run_params::{OnLimit, RunSettings};
pub use access::{Credential, CredentialKind, PushTarget, Scope, TokenInfo};
pub use audit::{Answer, ApprovalKind, AuditRecord, PendingApproval};
pub use cost::CostTotals;
pub use memory::MemoryEntry;
pub use progress::{ParkedPlan, PlanRecord, StepProgress, StepState};
pub use queue::{QueueState, QueuedRun};
pub use rewind::{LastRewind, RewindIntent, RewindPoint, WorkspaceMark};
pub use session::{
    refused_while_parked, Compaction, CompactionNote, DirectedBy, ModelFit, RunRecord,
    SessionRecord, TurnCheckpoint, Window, WindowMeasure,
};
pub use verdict::VerdictRecord;
pub use watch::{RunWatch, Streak};
