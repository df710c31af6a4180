//! Sessions: the ReAct loop.
//!
//! A session actor owns one conversation; each of its runs is driven by a [`driver`], one async
//! task whose text reads in the order a run happens (start there). The [`SessionSupervisor`]
//! starts session actors on demand, bounds the runs in flight, restarts a session that failed
//! and ends its run with a reason.

pub use ryvos_protocol::records::RunSettings;

mod actor;
mod after_crash;
mod before;
mod commits;
mod conversation;
mod cut_off;
mod desk;
mod driver;
mod history;
mod in_flight;
mod model_call;
mod notice;
mod oversight;
mod prompt;
mod recovery;
mod rewinding;
mod run;
mod sessions;
mod siblings;
mod spent;
mod supervisor;
mod supervisor_msg;
mod system_prompt;
mod turn;
mod undo;

pub(crate) use after_crash::settle_at_start;
#[cfg(feature = "testing")]
pub use history::History;
pub(crate) use notice::SessionNotice;
pub(crate) use rewinding::{fork, rewind};
pub use rewinding::{Forked, RewindError, RewindTo, Rewound};
pub(crate) use sessions::Sessions;
pub(crate) use supervisor::{
    RunsInFlight, SessionSupervisor, SessionSupervisorArgs, SessionSupervisorMsg,
};
pub use supervisor_msg::{RunTicket, StartRunError};
pub(crate) use undo::undo_last_compaction;
pub use undo::{UndoError, Undone};

use crate::checkpoint::Checkpoint;
use crate::config::AgentConfig;
use crate::cost_ledger::CostLedgerMsg;
use crate::event::{GlobalEvents, RunStatus};
use crate::guardian::GuardianMsg;
use crate::llm_stream::LlmMsg;
use crate::store::{RunRecord, Store};
use crate::supervision::ChildSlot;
use crate::tool_executor::ToolMsg;
use crate::tools::{ToolRegistry, Workspace};
use std::sync::Arc;

/// What every session uses: the store, its sibling actors, and the settings.
#[derive(Clone)]
pub(crate) struct Services {
    pub store: Store,
    pub checkpoint: Checkpoint,
    pub ledger: ChildSlot<CostLedgerMsg>,
    pub guardian: ChildSlot<GuardianMsg>,
    pub llm: ChildSlot<LlmMsg>,
    pub judge: ChildSlot<crate::judge::JudgeMsg>,
    /// How many times a model call lost with its actor is asked again (the model's retries).
    pub model_retries: u32,
    /// `$RYVOS_HOME`.
    pub home: std::path::PathBuf,
    /// What agents remembered, recalled into each run's prompt.
    pub memory: crate::memory::Memory,
    pub tools: ChildSlot<ToolMsg>,
    pub registry: ToolRegistry,
    /// The OS sandbox of every program a run starts.
    pub sandbox: crate::sandbox::Sandbox,
    pub agent: Arc<AgentConfig>,
    /// `[budget]`: what a run does at a limit, and the per-run limit a parked run is told.
    pub budget: Arc<crate::config::BudgetConfig>,
    /// Approval requests, to forget those of a session's calls that are no longer pending.
    pub approvals: crate::security::Approvals,
    /// The file requests waiting for editors' answers.
    pub editor_requests: crate::editor::EditorRequests,
    /// Checks around every model call.
    pub guardrails: Arc<Vec<Arc<dyn crate::guardrail::Guardrail>>>,
    pub global_events: GlobalEvents,
    /// The MCP servers' states: a run waits for those still starting, and warns about those
    /// that are down.
    pub mcp: crate::mcp::McpServers,
    /// The workspaces' snapshots, for rewinds.
    pub snapshots: crate::rewind::Snapshots,
    /// The person's own hooks (`config.toml`'s); a workspace's are read by each run.
    pub hooks: Arc<Vec<Arc<crate::hooks::Hook>>>,
}

/// A run to start, as a caller asks for it.
#[derive(Clone)]
pub struct RunSpec {
    /// Empty to continue the session without a new prompt: the run executes the calls left
    /// pending and goes on, counting its turns from the last prompt.
    pub prompt: String,
    pub workspace: Workspace,
    /// The caller's current directory, the first place context files (`SOUL.md`, …) are
    /// looked for, before the workspace and `$RYVOS_HOME`.
    pub caller_dir: Option<std::path::PathBuf>,
    /// For a goal-driven run: what the Judge holds its answers to.
    pub goal: Option<Arc<crate::judge::Goal>>,
    /// The host's callback, shown each message the run adds; it may interrupt the run.
    pub on_message: Option<crate::interrupt::OnMessage>,
    /// The caller reads and writes the run's files ([`crate::editor`]).
    pub editor_files: bool,
    /// MCP servers the caller brings for the session, by name: its runs alone are offered
    /// their tools ([`crate::mcp::SessionServers`]).
    pub mcp_servers: std::collections::BTreeMap<String, crate::config::McpServerConfig>,
    /// Their tools, once started (the engine sets it).
    pub session_tools: Option<crate::mcp::SessionTools>,
    /// The caller's trace: the run's span is a child of it (while telemetry is on).
    pub trace_parent: Option<crate::telemetry::TraceParent>,
    /// What this run asks for over the configuration (a model, its limits).
    pub settings: RunSettings,
    /// For a parked run going on: its record as it parked, and whether it goes on or ends.
    pub continues: Option<Continuation>,
    /// For a Director's step: the Director run it serves.
    pub directed_by: Option<ryvos_protocol::records::DirectedBy>,
}

/// A parked run taken up again: the same run, its totals kept.
#[derive(Clone, Debug)]
pub struct Continuation {
    /// The run as it parked.
    pub parked: Box<RunRecord>,
    /// `None` to go on; an end to end it with (`ryvos stop`).
    pub ends_as: Option<(RunStatus, String)>,
}
