//! The Ryvos engine: supervised actors that run the ReAct loop, durable in redb or PostgreSQL.
//!
//! ```text
//! RootSupervisor                 restarts a failed child with backoff; escalates past the intensity
//!  ├── CheckpointActor           owns the store's one writer (grouped commits), which outlives it
//!  ├── CostLedgerActor           prices usage; run / session / day / month totals; budgets
//!  ├── GuardianActor             doom loops, stalls, the token budget -> hints, retries, stops
//!  ├── LlmStreamActor            asks the model (retries, fallbacks), streams its answer
//!  ├── ToolExecutorActor         validates arguments, passes the security gate, runs tools
//!  ├── JudgeActor                a goal's criteria -> Accept / Retry / Escalate / Continue
//!  ├── McpHub                    one McpClientActor per [mcp.servers.NAME]; tools as NAME__tool
//!  └── SessionSupervisor         one SessionActor per active session; bounds runs in flight
//!       └── SessionActor         one conversation: loads it, starts runs, stops them, hibernates
//!            └── run driver      one task per run: the ReAct loop, in the order it happens
//! ```
//!
//! A run is driven by its [`session`]'s driver (read `session/driver/mod.rs` first). It asks the
//! [`cost_ledger`] for leave to spend, then loops: the [`llm_stream`] actor streams the model's
//! answer (text published as it arrives); an answer without tool calls goes to the [`judge`]
//! (with a goal) or ends the run; otherwise the [`tool_executor`] runs the calls through the
//! [`security`] gate, programs inside the [`sandbox`], once the turn that asked for them is
//! durable if any call has side effects. The turn then goes to the [`checkpoint`] writer while
//! the next model call leaves at once: commits overlap model calls, and commits of concurrent
//! sessions are grouped. The [`guardian`] reviews every turn (and any stall), and [`context`]
//! keeps the conversation within its window. Everything a run does is an [`event::Event`];
//! `RunComplete` is published once the run's end is durable.
//!
//! Actors reach each other through [`supervision::ChildSlot`]s, so a restarted actor is found
//! by everyone at once, and every question to one is bounded in time. The [`store`] is
//! append-only and repairs a turn cut off by a crash when the session is next loaded. The
//! [`director`] is a client on top: it plans a goal into steps and starts each step's run as a
//! host application would. [`Engine`] starts, addresses and stops the whole tree.
//! `tests/layering.rs` keeps every module using only the modules below it.

#![cfg_attr(feature = "testing", warn(unreachable_pub))]

mod callback;
mod checkpoint;
pub mod config;
mod context;
mod cost_ledger;
mod director;
mod editor;
mod engine;
mod event;
mod guardian;
mod guardrail;
mod heartbeat;
mod hooks;
use ryvos_protocol::ids;
mod interrupt;
mod judge;
mod llm_stream;
mod mcp;
mod memory;
use ryvos_protocol::message;
mod provider;
mod rewind;
/// The workspace snapshots behind `rewind` and `fork`.
pub use rewind::{Restored, Snapshots as WorkspaceSnapshots};
mod root;
mod sandbox;
mod security;
mod session;
mod store;
mod supervision;
mod telemetry;
mod text;
mod tokens;
mod tool_executor;
mod tools;
mod workspace;

// What the embedding runtime (the `ryvos` crate) uses; everything else is the engine's own.
pub use cost_ledger::Period;
pub use editor::{Editor, EditorAnswer};
pub use engine::{Engine, EngineConfig, EngineError};
pub use guardrail::{After, Before, Guardrail, GuardrailConfig};
pub use interrupt::{Interrupter, OnMessage};
pub use mcp::{McpServers, SessionTools};
pub use provider::recording::RecordingProvider;
pub use provider::{
    from_config as provider_from_config, keys_set as provider_keys_set, probe as probe_provider,
    ChatRequest, DeltaStream, EncodedPrefix, FinishReason, Provider, ProviderError, StreamDelta,
    ToolSpec, Usage,
};
pub use sandbox::{
    inner::main as sandbox_inner_main, Machine as SandboxMachine, Sandbox, Site as SandboxSite,
};
pub use security::{ApprovalError, Approvals};
pub use session::{
    Continuation, Forked, RewindError, RewindTo, Rewound, RunSettings, RunSpec, RunTicket,
    StartRunError, UndoError, Undone,
};
pub use store::{copy_store, now_ms, Change, Copied, Delivery, Lease, Relay, Store, StoreError};
pub use telemetry::{TelemetryError, TraceParent};
pub use tools::{
    builtin::all as builtin_tools, CallIdentity, Effect, Tool, ToolContext, ToolError,
};
pub use workspace::{Access, Opened, Workspace, WorkspaceError};

/// Hooks for tests and fuzzing: panics on purpose, crash states built by hand, and the
/// parsers and counters a fuzz target or a benchmark drives directly.
#[cfg(feature = "testing")]
pub mod testing;
