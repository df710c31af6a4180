//! The Ryvos engine: supervised actors that run the ReAct loop, durable in redb.
//!
//! ```text
//! RootSupervisor                 restarts a failed child with backoff; escalates past the intensity
//!  ├── CheckpointActor           owns the store's one writer (grouped commits), which outlives it
//!  ├── CostLedgerActor           prices usage; run / session / day / month totals; budgets
//!  ├── GuardianActor             doom loops, stalls, the token budget -> hints, retries, stops
//!  ├── LlmStreamActor            asks the model, streams text deltas, assembles tool calls
//!  ├── ToolExecutorActor         validates arguments, runs tools (bounded, in call order)
//!  └── SessionSupervisor         one SessionActor per active session; bounds runs in flight
//!       └── SessionActor         the ReAct loop as a state machine; events; checkpoints
//! ```
//!
//! A run: the session appends the user message and sends the conversation to the
//! [`llm_stream`] actor, which publishes text as it streams and returns the assembled answer.
//! An answer without tool calls ends the run. Otherwise the [`tool_executor`] runs the calls
//! (once the turn is durable, when any call has side effects), the results are appended paired
//! with their calls, and the turn's batch goes to the [`checkpoint`] writer while the next request
//! leaves at once: commits overlap model calls, and commits of concurrent sessions are grouped.
//! Around every turn the [`cost_ledger`] prices the call and checks the budgets before the next
//! one, and the [`guardian`] reviews the turn (and any stall) and answers with hints or a stop.
//! Everything a run does is an [`event::Event`].
//!
//! Actors reach each other through [`supervision::ChildSlot`]s, so a restarted actor is found
//! by everyone at once. The [`store`] is append-only and repairs a turn cut off by a crash when
//! the session is next loaded.

#![cfg_attr(feature = "testing", warn(unreachable_pub))]

mod callback;
mod checkpoint;
pub mod config;
mod context;
mod cost_ledger;
mod director;
mod engine;
mod event;
mod guardian;
mod guardrail;
mod heartbeat;
use ryvos_protocol::ids;
mod interrupt;
mod judge;
mod llm_stream;
mod mcp;
mod memory;
use ryvos_protocol::message;
mod provider;
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
pub use engine::{Engine, EngineConfig, EngineError};
pub use guardrail::{After, Before, Guardrail, GuardrailConfig};
pub use interrupt::{Interrupter, OnMessage};
pub use mcp::McpServers;
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
    Continuation, RunSettings, RunSpec, RunTicket, StartRunError, UndoError, Undone,
};
pub use store::{copy_store, now_ms, Change, Copied, Delivery, Lease, Relay, Store, StoreError};
pub use telemetry::{TelemetryError, TraceParent};
pub use tools::{builtin::all as builtin_tools, Tool, ToolContext, ToolError};
pub use workspace::{Access, Opened, Workspace, WorkspaceError};

/// Hooks for tests and fuzzing: panics on purpose, crash states built by hand, and the
/// parsers and counters a fuzz target or a benchmark drives directly.
#[cfg(feature = "testing")]
pub mod testing;
