//! Events: everything a run does, published as it happens.
//!
//! The serialized form is the public contract (one JSON object per line with a `"type"` field,
//! every event carrying `session_id` and `run_id`), shared by `--json`, socket subscribers and
//! run logs.

use crate::goal::CriterionResult;
use crate::ids::{CallId, RunId, SessionId};
use crate::plan::{Plan, StepEvent};
use crate::tier::SafetyTier;
use crate::verdict::Verdict;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An event of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
// Closed in the schema: a client may rely on every field being documented.
#[schemars(deny_unknown_fields)]
pub struct Event {
    pub session_id: SessionId,
    pub run_id: RunId,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type")]
pub enum EventKind {
    /// The run was accepted and its user message recorded.
    RunStarted {
        /// The directory the run's tools work in.
        #[serde(default)]
        workspace: String,
        /// The session's workspace before, when this run works elsewhere: its history speaks
        /// of files there.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previous_workspace: Option<String>,
    },
    /// A piece of the model's answer, as it streams.
    TextDelta { text: String },
    /// A tool call is about to run. `input` is the parsed arguments, or the raw text when they
    /// are not valid JSON.
    ToolStart {
        call_id: CallId,
        name: String,
        input: serde_json::Value,
    },
    /// A tool call finished; `output` is what the model will see.
    ToolEnd {
        call_id: CallId,
        name: String,
        is_error: bool,
        output: String,
    },
    /// A model call finished; which model answered and what it used. `purpose` says what the
    /// call was for when it was not the turn's own (a summary, a verdict): such calls carry
    /// the number of the turn they came after.
    ModelUsage {
        turn: u32,
        #[serde(default, skip_serializing_if = "CallPurpose::is_turn")]
        purpose: CallPurpose,
        model: String,
        input_tokens: u64,
        output_tokens: u64,
        /// True when the server reported no usage and the tokenizer estimated it.
        estimated: bool,
        /// What the call cost, as the cost ledger priced it.
        cost_cents: f64,
        /// Ryvos's own count of the request (its tokenizer), where it counted it: set against
        /// `input_tokens`, how far its tokenizer is from the model's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        counted_input_tokens: Option<u64>,
        /// What Ryvos expected the server to count: its own count corrected by what the
        /// session learned of the server's counts (see `ModelFit`), on which its decisions
        /// about the context window rest.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expected_input_tokens: Option<u64>,
    },
    /// A model call failed in a way worth trying again; the next attempt starts after
    /// `wait_ms`. When `discarded_text` is true, text of the failed attempt was already
    /// streamed: it is superseded by what the next attempt streams.
    ModelRetry {
        message: String,
        model: String,
        /// The attempt about to be made (2 for the first retry), over all models.
        attempt: u32,
        wait_ms: u64,
        discarded_text: bool,
    },
    /// The model `from` was exhausted (or refused the call); `to` is asked next. When
    /// `discarded_text` is true, text `from` streamed is superseded by what `to` streams.
    ModelFallback {
        message: String,
        from: String,
        to: String,
        discarded_text: bool,
    },
    /// A tool call waits for a person's approval (`ryvos approve REQ` / `ryvos deny REQ`).
    ApprovalRequested {
        request_id: String,
        call_id: CallId,
        tool: String,
        input: serde_json::Value,
        tier: SafetyTier,
        /// What made the call's tier what it is, for bash commands.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        reasons: Vec<String>,
        /// `in_doubt`: a crash cut the call off and it may have taken effect; asked whether
        /// it may run again (left out for the usual question).
        #[serde(default, skip_serializing_if = "crate::asked::ApprovalKind::is_call")]
        kind: crate::asked::ApprovalKind,
    },
    /// A call a crash cut off, taken up by the next run as its effect class allows:
    /// `action` is `run_again` (read-only, or idempotent with the same key), `found_done` (a
    /// reconcilable call had taken effect: its result is recorded, it is not run),
    /// `not_done` (it had not: it runs), or `in_doubt` (unsafe: a person is asked).
    CallRecovered {
        call_id: CallId,
        tool: String,
        effect: crate::effect::Effect,
        action: String,
    },
    /// The security gate decided about a call (after recording it in the audit table):
    /// `decided_by` is `policy`, `auto_approve`, `command_allowlist`, who answered an approval
    /// request, `unanswered`, `run_ended`, or `audit_failed`.
    SecurityDecision {
        call_id: CallId,
        tool: String,
        tier: SafetyTier,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        reasons: Vec<String>,
        allowed: bool,
        decided_by: String,
    },
    /// A hook decided about a step (after its decision joined the audit where the step is a
    /// call): `verdict` is `allow`, `deny`, `ask`, `block`, `stop`, `context` or `failed`.
    HookDecision {
        event: crate::hook::HookEvent,
        /// Its command line or address.
        hook: String,
        verdict: crate::hook::HookVerdict,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The call it was about, for a tool's events.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<CallId>,
    },
    /// The sandbox's egress proxy decided about a connection a command asked for (under
    /// `network = false` with `allowed_domains`): allowed, or refused with the reason.
    EgressDecision {
        host: String,
        port: u16,
        allowed: bool,
        reason: String,
    },
    /// A file tool of a run an editor started with `editor_files` asks it for the file at
    /// `path` (absolute, inside the workspace) or, with `content`, to write it: answered with
    /// `file_answer`. Unanswered for 20 s, the run's file tools use the disk from then on.
    FileRequested {
        request_id: String,
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
    },
    /// An approval request was answered, or denied as unanswered (`by`: `unanswered`).
    ApprovalResolved {
        request_id: String,
        approved: bool,
        reason: Option<String>,
        by: String,
    },
    /// The Judge's verdict on a goal-driven run's answer (`periodic`: judged mid-run, every
    /// `evaluate_every_turns`), with the weighted `score` and each criterion's result.
    JudgeVerdict {
        verdict: Verdict,
        reason: String,
        score: f64,
        criteria: Vec<CriterionResult>,
        periodic: bool,
    },
    /// A Director run's plan: made (`revision` 0), revised after a failed step, or taken up
    /// again after a restart (`resumed`).
    DirectorPlan {
        plan: Plan,
        revision: u32,
        resumed: bool,
    },
    /// A step of a Director's plan moved: its run (in its own session) started, completed,
    /// failed, or is being retried.
    DirectorStep {
        step: String,
        status: StepEvent,
        step_session_id: SessionId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step_run_id: Option<RunId>,
        /// The step's result when completed, why when it failed.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        detail: String,
    },
    /// A guardrail blocked the run (status `blocked`): `stage` `before` (the model was not
    /// called) or `after` (the answer was kept out of the history).
    GuardrailTripwire {
        reason: String,
        guardrail: String,
        stage: String,
    },
    /// The run parked at a limit, its turns stored: it holds nothing while parked, and goes on
    /// (the same run, its totals kept) when it is continued (`ryvos continue RUN`, the socket's
    /// `continue`). `RunComplete` with status `parked` follows.
    RunParked {
        reason: ParkReason,
        /// Why, and what continues it.
        message: String,
    },
    /// The run paused (status `interrupted`, or `max_turns`): `pending_calls` were left
    /// without results, for the next run on the session to execute first.
    Interrupt {
        reason: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pending_calls: Vec<CallId>,
    },
    /// The Guardian put a corrective note into the conversation; the next request carries it.
    GuardianHint {
        message: String,
        /// 1 for a first hint, 2 for the stronger one that follows when it went unheeded.
        level: u8,
    },
    /// The same tool call, with the same input and the same result, came `repeats` times in a
    /// row.
    GuardianDoomLoop {
        message: String,
        tool: String,
        repeats: u32,
        /// True when every one of the repeated calls failed.
        failed: bool,
        action: GuardianAction,
    },
    /// No progress (a model answer completed, a tool call finished) for `silent_secs`.
    GuardianStall {
        message: String,
        phase: StallPhase,
        silent_secs: u64,
        action: GuardianAction,
    },
    /// A problem with how spending is measured, e.g. a model with no known price.
    GuardianBudgetAlert { message: String, model: String },
    /// Spending (cents) or context size (tokens) passed a warning threshold.
    BudgetWarning {
        scope: BudgetScope,
        spent: serde_json::Number,
        limit: serde_json::Number,
        message: String,
    },
    /// A limit was reached: the run stops (or, for `month`, no new run starts).
    BudgetExceeded {
        scope: BudgetScope,
        spent: serde_json::Number,
        limit: serde_json::Number,
        message: String,
    },
    /// The conversation reached the memory-flush point: the model was asked to save what must
    /// outlive its oldest messages (with `memory_write`) before they leave the context.
    MemoryFlush {
        message: String,
        context_tokens: u64,
    },
    /// The conversation outgrew its budget: its oldest messages (`first_seq` up to
    /// `first_kept_seq`) left the context (the store keeps them), behind a summary of them when
    /// `summarized`. `facts_kept` are the exact facts the summary left out, kept verbatim below
    /// it; `facts_dropped` those past `[agent] summary_facts`. `ryvos compact undo` brings the
    /// messages back.
    ContextPruned {
        dropped_messages: u64,
        summarized: bool,
        tokens_before: u64,
        tokens_after: u64,
        #[serde(default)]
        first_seq: u64,
        #[serde(default)]
        first_kept_seq: u64,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        facts_kept: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        facts_dropped: Vec<String>,
        /// The model that wrote the summary.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// A turn is durably stored: a crash from now on cannot lose it.
    CheckpointSaved { turn: u32 },
    /// Something the user should know that did not stop anything (a context file left out).
    Warning { message: String },
    /// The model's answer stopped at its output limit (`finish_reason: length`; Anthropic:
    /// `max_tokens`). Calls it cut off (`cut_calls`) do not run; the model is told why.
    OutputTruncated {
        message: String,
        model: String,
        cut_calls: Vec<CallId>,
    },
    /// Something went wrong; the run may go on or end (see `RunComplete`).
    Error { message: String },
    /// The run ended. Always the last event of a run.
    RunComplete {
        status: RunStatus,
        output: String,
        turns: u32,
        input_tokens: u64,
        output_tokens: u64,
        /// What the run's model calls cost, as the cost ledger priced them; `null` only when
        /// it could not be known (a run cut off by a failure before its cost was read back).
        cost_cents: Option<f64>,
        duration_ms: u64,
        /// Why the run ended, when it did not complete.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The output was cut off at the model's output limit (`max_output_tokens`).
        #[serde(default)]
        truncated: bool,
        /// Why a `parked` run parked.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        park_reason: Option<ParkReason>,
    },
}

/// What a model call was for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CallPurpose {
    /// The turn's own answer.
    #[default]
    Turn,
    /// A summary of messages leaving the context.
    Summary,
    /// The judge's verdict on the run's goal.
    Judge,
}

impl CallPurpose {
    pub fn is_turn(&self) -> bool {
        *self == Self::Turn
    }
}

/// Why a run parked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ParkReason {
    /// It reached its per-run budget: a continue raises it (`--budget-cents`).
    BudgetRun,
    /// The month reached its limit: the run goes on when the month turns or the limit is
    /// raised.
    BudgetMonth,
    /// The Judge escalated (`[agent.judge] park_on_escalate`): a person looks, then continues
    /// it (the model is told to go on) or stops it.
    Escalated,
}

impl ParkReason {
    /// The reason as written in events and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            ParkReason::BudgetRun => "budget_run",
            ParkReason::BudgetMonth => "budget_month",
            ParkReason::Escalated => "escalated",
        }
    }
}

impl std::fmt::Display for ParkReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the Guardian did about a problem it found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GuardianAction {
    /// A corrective hint goes into the conversation.
    Hint,
    /// The problem persisted after a hint: a stronger one goes in.
    StrongerHint,
    /// The silent model call was cut and is being made again.
    Retry,
    /// The problem persisted after every hint: the run is stopped.
    Stop,
}

/// Where a run was when it stalled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StallPhase {
    /// Waiting for the model, whose stream went silent.
    Model,
    /// Waiting for tool calls to finish.
    Tools,
}

/// What a budget event measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BudgetScope {
    /// This run's spending against `per_run_limit_cents` (cents).
    Run,
    /// This calendar month's spending (UTC) against `monthly_limit_cents` (cents).
    Month,
    /// The conversation's size against `max_context_tokens` (tokens).
    Tokens,
}

impl std::fmt::Display for BudgetScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BudgetScope::Run => "run",
            BudgetScope::Month => "month",
            BudgetScope::Tokens => "tokens",
        })
    }
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Completed,
    MaxTurns,
    Timeout,
    BudgetExceeded,
    TokenBudgetExceeded,
    Escalated,
    Blocked,
    Interrupted,
    Cancelled,
    Failed,
    /// Not an end: the run stopped at a limit (see `RunParked`) and goes on, the same run,
    /// when it is continued.
    Parked,
}

impl RunStatus {
    /// False only for `parked`: the run is not over.
    pub fn is_end(self) -> bool {
        self != RunStatus::Parked
    }

    /// True for the ends that pause a run rather than close it: tool calls it asked for and
    /// never started stay pending, and the next run on the session executes them first.
    pub fn pauses(self) -> bool {
        matches!(self, RunStatus::Interrupted | RunStatus::MaxTurns)
    }

    /// The status as written in events and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Completed => "completed",
            RunStatus::MaxTurns => "max_turns",
            RunStatus::Timeout => "timeout",
            RunStatus::BudgetExceeded => "budget_exceeded",
            RunStatus::TokenBudgetExceeded => "token_budget_exceeded",
            RunStatus::Escalated => "escalated",
            RunStatus::Blocked => "blocked",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Failed => "failed",
            RunStatus::Parked => "parked",
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a run ended: what `RunComplete` says, with the run's ids (the `run` method's result).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunOutcome {
    pub session_id: SessionId,
    pub run_id: RunId,
    pub status: RunStatus,
    pub output: String,
    pub reason: Option<String>,
    pub turns: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_cents: Option<f64>,
    pub duration_ms: u64,
    /// The output was cut off at the model's output limit.
    pub truncated: bool,
    /// Why a `parked` run parked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub park_reason: Option<ParkReason>,
}

impl RunOutcome {
    /// The outcome a `RunComplete` event reports.
    pub fn from_event(event: &Event) -> Option<Self> {
        let EventKind::RunComplete {
            status,
            output,
            turns,
            input_tokens,
            output_tokens,
            cost_cents,
            duration_ms,
            reason,
            truncated,
            park_reason,
        } = &event.kind
        else {
            return None;
        };
        Some(Self {
            session_id: event.session_id.clone(),
            run_id: event.run_id.clone(),
            status: *status,
            output: output.clone(),
            reason: reason.clone(),
            turns: *turns,
            input_tokens: *input_tokens,
            output_tokens: *output_tokens,
            cost_cents: *cost_cents,
            duration_ms: *duration_ms,
            truncated: *truncated,
            park_reason: *park_reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_with_type_and_ids_at_top_level() {
        let event = Event {
            session_id: SessionId::new("s_1"),
            run_id: RunId::new("r_1"),
            kind: EventKind::CheckpointSaved { turn: 3 },
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"type": "CheckpointSaved", "session_id": "s_1", "run_id": "r_1", "turn": 3})
        );
        let back: Event = serde_json::from_value(json).unwrap();
        assert_eq!(back, event);
    }

    #[test]
    fn run_complete_has_every_contract_field() {
        let kind = EventKind::RunComplete {
            status: RunStatus::MaxTurns,
            output: String::new(),
            turns: 2,
            input_tokens: 10,
            output_tokens: 5,
            cost_cents: None,
            duration_ms: 7,
            reason: None,
            truncated: false,
            park_reason: None,
        };
        let json = serde_json::to_value(&kind).unwrap();
        for field in [
            "status",
            "output",
            "turns",
            "input_tokens",
            "output_tokens",
            "cost_cents",
            "duration_ms",
        ] {
            assert!(json.get(field).is_some(), "missing {field}");
        }
        assert_eq!(json["status"], "max_turns");
    }
}
