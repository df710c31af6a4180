//! Sessions, their runs and their turns, as stored.

use super::rewind::{LastRewind, RewindIntent, RewindPoint};
use crate::event::{ParkReason, RunStatus};
use crate::goal::Goal;
use crate::ids::{CallId, RunId, SessionId};
use crate::run_params::RunSettings;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A session's summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
// Closed in the schema: a client may rely on every field being documented.
#[schemars(deny_unknown_fields)]
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
    pub paused_calls: Vec<CallId>,
    /// The workspace of the session's latest run (absolute): `ryvos run --continue` takes up
    /// the most recent session of a workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The session's first prompt: its first line, up to 80 bytes. What `ryvos sessions`
    /// shows it by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// How the latest run ended; `None` while it is in flight, before any run, or on a session
    /// stored before this was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<RunStatus>,
    /// The model server's count of the session's latest request, so that a resumed session
    /// knows its size without counting it. Absent until a count that can be the request's
    /// (not below a sixteenth of Ryvos's bound on its size) is reported since the window last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<WindowMeasure>,
    /// What the runtime learned of the session's model from its server: how it counts tokens
    /// against Ryvos's tokenizer, and its context window where smaller than configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_fit: Option<ModelFit>,
    /// A rewind cut off before it finished: the session takes no run until it is run again
    /// (or undone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewinding: Option<RewindIntent>,
    /// The session's last rewind, which `rewind --undo` undoes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_rewind: Option<LastRewind>,
}

impl SessionRecord {
    /// Why the session takes no new run, when it cannot: see [`refused_while_parked`].
    pub fn refused_while_parked(&self) -> Option<String> {
        refused_while_parked(&self.session_id, self.last_run.as_ref(), self.last_status)
    }
}

/// Why a session takes no new run while its latest run (`last_run`, `last_status`) is parked:
/// a new run would go on from a conversation that moved on. `None` when it may take one.
pub fn refused_while_parked(
    session: &SessionId,
    last_run: Option<&RunId>,
    last_status: Option<RunStatus>,
) -> Option<String> {
    let parked = last_run.filter(|_| last_status == Some(RunStatus::Parked))?;
    Some(format!(
        "session {session} has a parked run, {parked}: `ryvos continue {parked}` goes on with \
         it, `ryvos stop {parked}` ends it"
    ))
}

/// What a model's server taught the runtime of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ModelFit {
    /// The model it was learned of: another model starts afresh.
    pub model: String,
    /// The server's count per 1,000 tokens Ryvos counts (its tokenizer is not the model's):
    /// Ryvos's sizes are taken times this.
    pub tokens_per_1000: u32,
    /// The model's context window, as its server reported it in an overflow, where smaller
    /// than `max_context_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u64>,
}

impl ModelFit {
    /// The fit of `model` before anything is learned.
    pub fn of(model: &str) -> Self {
        Self {
            model: model.to_owned(),
            tokens_per_1000: 1000,
            window: None,
        }
    }

    /// `tokens` as the model's server counts them.
    pub fn scale(&self, tokens: u64) -> u64 {
        tokens.saturating_mul(u64::from(self.tokens_per_1000)) / 1000
    }

    /// Takes in a count: the server counted `server` tokens where Ryvos counted `counted`.
    /// Averaged with what was known (a count varies with what the request held). A ratio
    /// under 0.5 or over 3 is not a count of the same request (a server that leaves cached
    /// input out of its count, say) and is not taken.
    pub fn learn(&mut self, server: u64, counted: u64) {
        if counted == 0 {
            return;
        }
        let sample = server.saturating_mul(1000) / counted;
        if !(500..=3000).contains(&sample) {
            return;
        }
        let sample = sample as u32;
        self.tokens_per_1000 = match self.tokens_per_1000 {
            1000 => sample,
            known => (known + sample) / 2,
        };
    }
}

/// A model server's count of a request made from a session's context window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct WindowMeasure {
    /// The seq the window started at (after the latest compaction; 0 without one): a count of
    /// another window is not used.
    pub window_start: u64,
    /// The request carried the window's messages before this seq.
    pub before_seq: u64,
    /// The server's count of the request: those messages, the system prompt and the tools.
    pub tokens: u64,
    /// The system prompt's size then (counted, or bounded by its bytes): a longer one now
    /// adds the difference.
    pub system_tokens: u64,
}

/// A run, from its start to its end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
// Closed in the schema: a client may rely on every field being documented.
#[schemars(deny_unknown_fields)]
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
    pub goal: Option<Goal>,
    /// The model the run asked (a fallback may have answered some calls: see its events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Why a `parked` run parked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub park_reason: Option<ParkReason>,
    /// What the run asked for over the configuration, kept for its continues.
    #[serde(default, skip_serializing_if = "RunSettings::is_empty")]
    pub settings: RunSettings,
    /// Model calls recorded with the cost ledger, cut ones too (a continue goes on counting).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub model_calls: u32,
    /// How long the run has run, in milliseconds, its parked time left out (while in flight:
    /// up to its latest continue).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub active_ms: u64,
    /// For a Director's step: the Director run it serves (which continues or stops it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directed_by: Option<DirectedBy>,
    /// The session as the run found it: what a rewind to before the run restores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<RewindPoint>,
}

impl RunRecord {
    /// What the run cost, in cents.
    pub fn cost_cents(&self) -> f64 {
        self.cost_microcents as f64 / 1_000_000.0
    }

    /// Run `run_id` of `session_id`, begun on `prompt` at `started_at_ms`: nothing done yet.
    pub fn begun(run_id: RunId, session_id: SessionId, prompt: &str, started_at_ms: u64) -> Self {
        Self {
            run_id,
            session_id,
            prompt: prompt.to_owned(),
            status: None,
            reason: None,
            output: String::new(),
            turns: 0,
            input_tokens: 0,
            output_tokens: 0,
            cost_microcents: 0,
            started_at_ms,
            ended_at_ms: None,
            goal: None,
            model: None,
            park_reason: None,
            settings: Default::default(),
            model_calls: 0,
            active_ms: 0,
            directed_by: None,
            start: None,
        }
    }
}

/// The Director run a step's run serves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct DirectedBy {
    pub session_id: SessionId,
    pub run_id: RunId,
}

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

/// A completed turn: the messages it added and what it cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    /// The session as this turn left it: what a rewind to the turn restores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point: Option<RewindPoint>,
}

/// A session's context window: the messages before `first_kept_seq` were pruned from what the
/// model sees (they stay in the store), and `summary`, when there is one, stands for them. The
/// rest describes the compaction that made the window, and what undoing it restores.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Compaction {
    pub first_kept_seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The first message this compaction took out of the window (where it started before).
    #[serde(default)]
    pub first_seq: u64,
    /// The exact facts the summary left out, kept verbatim below it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facts_kept: Vec<String>,
    /// The exact facts the summary left out past the budget (`[agent] summary_facts`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facts_dropped: Vec<String>,
    #[serde(default)]
    pub tokens_before: u64,
    #[serde(default)]
    pub tokens_after: u64,
    /// The model that wrote the summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Unix milliseconds.
    #[serde(default)]
    pub at_ms: u64,
    /// The window before this compaction, which undoing it restores; `None` once undone, or
    /// when the store kept none (a compaction older than this record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<Window>,
    /// This record is a window restored by `compact undo` (at these Unix milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undone_at_ms: Option<u64>,
    /// The session's compactions before this one, oldest first (the latest 100), as `history`
    /// shows them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<CompactionNote>,
    /// This window was set by a rewind (to the point this names), not by a compaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewound_to: Option<String>,
}

/// An earlier compaction, as it is remembered: what it covered and kept, without its summary.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CompactionNote {
    pub first_seq: u64,
    pub first_kept_seq: u64,
    #[serde(default)]
    pub summarized: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facts_kept: Vec<String>,
    #[serde(default)]
    pub tokens_before: u64,
    #[serde(default)]
    pub tokens_after: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default)]
    pub at_ms: u64,
}

impl CompactionNote {
    /// The most earlier compactions a record remembers.
    pub const KEPT: usize = 100;

    /// What `compaction` is remembered as.
    pub fn of(compaction: &Compaction) -> Self {
        Self {
            first_seq: compaction.first_seq,
            first_kept_seq: compaction.first_kept_seq,
            summarized: compaction.summary.is_some(),
            facts_kept: compaction.facts_kept.clone(),
            tokens_before: compaction.tokens_before,
            tokens_after: compaction.tokens_after,
            model: compaction.model.clone(),
            at_ms: compaction.at_ms,
        }
    }
}

/// A context window: where it starts, and the summary before it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Window {
    pub first_kept_seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}
