//! Every method of the socket protocol: its parameters, its result, and the [`Call`] that
//! pairs them under the method's name.

use super::{
    Call, ForkParams, ForkResult, HooksListing, HooksParams, HooksTrusted, RewindParams,
    RewindResult,
};
use crate::event::RunOutcome;
use crate::message::Message;
use crate::records::{
    AuditRecord, Compaction, PendingApproval, QueuedRun, RunRecord, Scope, SessionRecord, TokenInfo,
};
use crate::report::CostReport;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The parameters of a method that takes none: `{}`, or left out.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

pub use crate::run_params::RunParams;

/// The parameters of a method about one session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionParams {
    pub session: String,
}

/// `continue`'s parameters: the parked run, and its budget from now on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContinueParams {
    /// The parked run's id (`r_…`).
    pub run: String,
    /// The run's per-run limit in cents from now on: its total, counted from its start, not
    /// what it may spend from here (0: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_cents: Option<u64>,
}

/// The parameters of a method about one run (`r_…`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunIdParams {
    pub run: String,
}

/// The parameters of a method about one queued run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueuedRunParams {
    pub run: String,
}

/// `runs`' parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunsParams {
    /// Only the runs in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<crate::records::QueueState>,
    /// At most this many, the most recently submitted first (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// `approve`'s and `deny`'s parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerParams {
    pub request_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// With `approve`: the same call needs no approval again in this session (never T4).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub always: bool,
    /// Who answers, as the audit and `ApprovalResolved` name them (default: `ryvos approve`
    /// or `ryvos deny`), in 1 to [`MAX_BY_BYTES`] bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_BY_BYTES))]
    pub by: Option<String>,
}

/// `file_answer`'s parameters: what the editor did with a `file_requested` event's request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileAnswerParams {
    pub request_id: String,
    /// A read's text (left out for a write done).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Why the editor could not read or write the file; the tool fails with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `file_answer`'s result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct FileAnswered {
    pub request_id: String,
}

/// The longest `by` an answer may give, in bytes (the schema's `maxLength` counts characters:
/// the same for ASCII).
pub const MAX_BY_BYTES: usize = 100;

/// `status`'s result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
// Closed in the schema: a client may rely on every field being documented.
#[schemars(deny_unknown_fields)]
pub struct StatusResult {
    pub pid: u32,
    pub version: String,
    pub protocol: u32,
    pub home: String,
    pub socket: String,
    pub uptime_secs: u64,
    /// How commands are confined, or why they cannot be.
    pub sandbox: String,
    /// False when commands cannot be confined: then every command is refused.
    pub sandbox_enforced: bool,
    /// What weakens the sandbox as configured (`mode = "off"`, `network = true`): commands
    /// run, with less in their way. Absent when nothing does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_warning: Option<String>,
    /// Where the console is served (`http://127.0.0.1:7420`, `https://…`); absent when
    /// `[http] listen` is not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub console: Option<String>,
    /// The store's backend (`redb` or `postgres`).
    pub store: String,
    /// The config file the daemon read; absent when it runs on the built-in defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// Why the store cannot write, while it cannot (a full or failing disk): runs that need it
    /// fail until it can, and the daemon goes on serving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_fault: Option<String>,
    /// For a store reached over a network (PostgreSQL): whether its connections are encrypted
    /// and the server verified, as the server reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_security: Option<String>,
    /// The configured MCP servers, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp: Vec<crate::mcp::McpServerStatus>,
    /// With a store daemons share: this daemon's id among them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon_id: Option<String>,
    /// With a store daemons share: the sessions this daemon holds leases on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leases: Option<usize>,
    /// With a run queue: the runs waiting for a daemon, cluster-wide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<u64>,
    /// With a run queue: the queued runs this daemon is running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_runs_here: Option<usize>,
    /// The runs parked at a budget, waiting for `continue` (or the month's turn).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parked: Vec<ParkedRun>,
    /// The runs this daemon has in flight, the oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_flight: Vec<RunInFlight>,
}

/// A run in flight, as `status` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RunInFlight {
    pub run_id: crate::ids::RunId,
    pub session_id: crate::ids::SessionId,
    pub started_at_ms: u64,
    /// The run's prompt, its first line cut at 80 characters (empty for a run that goes on
    /// without one).
    pub prompt: String,
}

/// A run parked at a budget, as `status` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ParkedRun {
    pub run_id: crate::ids::RunId,
    pub session_id: crate::ids::SessionId,
    pub reason: crate::event::ParkReason,
    /// What the run has spent so far, in cents.
    pub cost_cents: f64,
}

/// A stored message, as `history` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryMessage {
    pub seq: u64,
    /// The message's tokens, as counted when it was stored; 0 when it was not counted (sizes
    /// are counted only once a conversation nears its limits).
    pub tokens: u32,
    /// Shared with the loaded history rather than copied.
    pub message: Arc<Message>,
}

/// `history`'s result: everything stored about a session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
// Closed in the schema: a client may rely on every field being documented.
#[schemars(deny_unknown_fields)]
pub struct HistoryResult {
    pub session: SessionRecord,
    pub messages: Vec<HistoryMessage>,
    /// Oldest first; a run whose `status` is `null` is in flight.
    pub runs: Vec<RunRecord>,
    /// Every decision of the security gate, oldest first.
    pub audit: Vec<AuditRecord>,
    /// The session's last compaction (or the window an undo restored): the messages before
    /// its `first_kept_seq` are out of the model's window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<Compaction>,
    /// The session's turns, numbered as `rewind --turn` takes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<super::HistoryTurn>,
}

/// `compact_undo`'s result: the window restored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
// Closed in the schema: a client may rely on every field being documented.
#[schemars(deny_unknown_fields)]
pub struct CompactUndoResult {
    pub session_id: String,
    /// The window starts at this message again.
    pub first_kept_seq: u64,
    /// How many messages came back into the window.
    pub restored_messages: u64,
    /// The restored window's size in tokens (counted where the store has the count, bounded
    /// by bytes elsewhere).
    pub context_tokens: u64,
    pub max_context_tokens: u64,
    /// The window is under the point where the next run compacts it again.
    pub fits: bool,
}

/// `approve`'s and `deny`'s result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
// Closed in the schema: a client may rely on every field being documented.
#[schemars(deny_unknown_fields)]
pub struct AnswerResult {
    pub request_id: String,
    pub approved: bool,
}

/// `interrupt`'s result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
// Closed in the schema: a client may rely on every field being documented.
#[schemars(deny_unknown_fields)]
pub struct InterruptResult {
    pub interrupting: bool,
}

/// `cancel`'s result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
// Closed in the schema: a client may rely on every field being documented.
#[schemars(deny_unknown_fields)]
pub struct CancelResult {
    pub cancelled: bool,
}

/// `shutdown`'s result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
// Closed in the schema: a client may rely on every field being documented.
#[schemars(deny_unknown_fields)]
pub struct ShutdownResult {
    pub stopping: bool,
}

/// `console`'s result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ConsoleResult {
    /// The console's address, its one-time login code in the fragment (which a browser does
    /// not send on, nor a server log).
    pub url: String,
    /// How long the code works, if it is not used first.
    pub expires_in_secs: u64,
}

/// `token_create`'s parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenCreateParams {
    /// What the token is for: 1 to 64 letters, digits, `-`, `_` or `.`; unique.
    pub name: String,
    /// `operate` when left out.
    #[serde(default)]
    pub scope: Scope,
}

/// The parameters of a method about one token.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenParams {
    pub name: String,
}

/// `token_create`'s result: the only time the token's secret is shown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TokenCreated {
    pub name: String,
    pub scope: Scope,
    /// What a program sends as `Authorization: Bearer …`.
    pub token: String,
}

/// `token_revoke`'s result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TokenRevoked {
    pub name: String,
    /// False when there was no such token.
    pub revoked: bool,
}

macro_rules! calls {
    ($($(#[$doc:meta])* $name:ident = $method:literal: $params:ty => $result:ty;)*) => {
        $(
            $(#[$doc])*
            pub struct $name;

            impl Call for $name {
                const METHOD: &'static str = $method;
                type Params = $params;
                type Result = $result;
            }
        )*

        /// Each method's name with its parameters' and result's JSON Schemas.
        pub(super) fn each_call() -> Vec<(&'static str, schemars::Schema, schemars::Schema)> {
            vec![$((
                $method,
                schemars::schema_for!($params),
                schemars::schema_for!($result),
            )),*]
        }
    };
}

calls! {
    /// Starts a run and streams its events; the result is how it ended.
    Run = "run": RunParams => RunOutcome;
    /// The daemon's process, version and sandbox.
    Status = "status": NoParams => StatusResult;
    /// Every session, most recently updated first.
    Sessions = "sessions": NoParams => Vec<SessionRecord>;
    /// Everything stored about one session.
    History = "history": SessionParams => HistoryResult;
    /// Spending this month against the limits.
    Cost = "cost": NoParams => CostReport;
    /// The tool calls waiting for a person's approval, oldest first.
    Approvals = "approvals": NoParams => Vec<PendingApproval>;
    /// Approves a waiting call.
    Approve = "approve": AnswerParams => AnswerResult;
    /// Denies a waiting call.
    Deny = "deny": AnswerParams => AnswerResult;
    /// Answers a file request (a `file_requested` event) of a run started with
    /// `editor_files`.
    FileAnswer = "file_answer": FileAnswerParams => FileAnswered;
    /// Pauses a session's run in flight after its current step.
    Interrupt = "interrupt": SessionParams => InterruptResult;
    /// Stops a session's run in flight for good.
    Cancel = "cancel": SessionParams => CancelResult;
    /// Sets a session's window back to before its last compaction.
    CompactUndo = "compact_undo": SessionParams => CompactUndoResult;
    /// Takes a session back to a turn or a run's start: its window and its workspace's files.
    Rewind = "rewind": RewindParams => RewindResult;
    /// A new session from a session's point, working in a copy of its files as they were.
    Fork = "fork": ForkParams => ForkResult;
    /// Continues a parked run from where it parked (the same run) and streams its events, as
    /// `run` does; the result is how it ended.
    Continue = "continue": ContinueParams => RunOutcome;
    /// Ends a run: a parked one where it parked (`budget_exceeded`), one in flight cancelled;
    /// streams its last events, and the result is how it ended.
    Stop = "stop": RunIdParams => RunOutcome;
    /// Stops the daemon; runs in flight pause once their turns are durable.
    Shutdown = "shutdown": NoParams => ShutdownResult;
    /// Puts a run in the queue, for whichever daemon has room; answers at once.
    Submit = "submit": RunParams => QueuedRun;
    /// The queued, running and finished runs of the whole cluster.
    Runs = "runs": RunsParams => Vec<QueuedRun>;
    /// Waits for a queued run's end; the result is how it ended.
    Wait = "wait": QueuedRunParams => RunOutcome;
    /// A queued run's progress as events (live where this daemon runs it, turn by turn from
    /// the store otherwise); the result is how it ended.
    Follow = "follow": QueuedRunParams => RunOutcome;
    /// A one-time login to the daemon's console: its address with a code that works once,
    /// for minutes.
    Console = "console": NoParams => ConsoleResult;
    /// Makes a bearer token for the HTTP door, stored hashed; its secret is in the result only.
    TokenCreate = "token_create": TokenCreateParams => TokenCreated;
    /// The tokens, oldest first, without their secrets.
    Tokens = "tokens": NoParams => Vec<TokenInfo>;
    /// Revokes a token at once, on every daemon sharing the store.
    TokenRevoke = "token_revoke": TokenParams => TokenRevoked;
    /// The hooks runs in a workspace get: `config.toml`'s, and the workspace's own with
    /// whether a person trusted its file as it is.
    Hooks = "hooks": HooksParams => HooksListing;
    /// Trusts a workspace's `.ryvos/hooks.toml` as it is now (its content's hash, kept in the
    /// store): its hooks run until the file changes.
    HooksTrust = "hooks_trust": HooksParams => HooksTrusted;
}
