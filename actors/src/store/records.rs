//! What the store keeps besides messages.

use crate::event::RunStatus;
use crate::ids::{RunId, SessionId};
use serde::{Deserialize, Serialize};

/// A completed turn: the messages it added and what it cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnCheckpoint {
    pub run_id: RunId,
    /// The turn's number within its run, from 1.
    pub turn: u32,
    pub first_seq: u64,
    pub last_seq: u64,
    pub tools_called: Vec<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The size of the conversation after this turn.
    pub context_tokens: u64,
    /// Unix milliseconds.
    pub at_ms: u64,
}

/// A run, from its start to its end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub run_id: RunId,
    pub session_id: SessionId,
    pub prompt: String,
    /// `None` while the run is in flight. A run found in flight when its session is loaded was
    /// cut off by a crash.
    pub status: Option<RunStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub output: String,
    pub turns: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// What the run's model calls cost, in millionths of a cent.
    #[serde(default)]
    pub cost_microcents: u64,
    pub started_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<u64>,
    /// What a goal-driven run was held to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<crate::judge::Goal>,
}

/// One verdict of the Judge on a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VerdictRecord {
    pub run_id: RunId,
    /// Its place among the run's verdicts, from 1.
    pub n: u32,
    /// The turn it judged.
    pub turn: u32,
    pub at_ms: u64,
    #[serde(flatten)]
    pub judgement: crate::judge::Judgement,
}

/// A session's summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub session_id: SessionId,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
    pub message_count: u64,
    pub last_run: Option<RunId>,
    /// Tool calls a run left pending when it paused (an interrupt, `max_turns`), not yet taken
    /// up by another run: on reload they stay pending, while any other call found without a
    /// result was cut off by a crash and gets a result saying so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paused_calls: Vec<crate::ids::CallId>,
}

/// Spending under one ledger key: `run:<id>`, `session:<id>`, `day:YYYY-MM-DD` or
/// `month:YYYY-MM` (UTC).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostTotals {
    /// Model calls recorded.
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Millionths of a cent: tokens times a price in cents per million tokens, so sums of
    /// integer prices are exact.
    pub cost_microcents: u64,
    /// Calls whose usage the server did not report, estimated with the tokenizer.
    pub estimated_calls: u64,
}

impl CostTotals {
    /// The cost in cents.
    pub fn cents(&self) -> f64 {
        self.cost_microcents as f64 / 1_000_000.0
    }

    /// Adds one call's totals.
    pub fn add(&mut self, call: &CostTotals) {
        self.calls += call.calls;
        self.input_tokens += call.input_tokens;
        self.output_tokens += call.output_tokens;
        self.cost_microcents += call.cost_microcents;
        self.estimated_calls += call.estimated_calls;
    }
}

/// A session's context window: the messages before `first_kept_seq` were pruned from what the
/// model sees (they stay in the store), and `summary`, when there is one, stands for them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compaction {
    pub first_kept_seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// Something an agent chose to remember (`memory_write`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryEntry {
    pub id: String,
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The session that wrote it.
    pub session_id: SessionId,
    pub created_at_ms: u64,
    /// The content's vector, when embeddings are configured and answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<Vec<f32>>,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// One decision of the security gate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub at_ms: u64,
    pub session_id: SessionId,
    pub run_id: RunId,
    pub call_id: crate::ids::CallId,
    pub tool: String,
    /// The call's arguments as the model gave them (long ones clipped).
    pub input: String,
    pub tier: crate::tools::SafetyTier,
    /// What raised the tier above the tool's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    pub allowed: bool,
    /// `policy`, `auto_approve`, `command_allowlist`, who answered an approval request,
    /// `unanswered` (it timed out), or `run_ended`.
    pub decided_by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}
