//! The Ryvos engine: supervised actors that run the ReAct loop, durable in redb.
//!
//! ```text
//! RootSupervisor                 restarts a failed child with backoff; escalates past the intensity
//!  ├── CheckpointActor           the only store writer: append-only history, grouped commits
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
//! with their calls, and the turn's batch goes to the [`checkpoint`] actor while the next request
//! leaves at once: commits overlap model calls, and commits of concurrent sessions are grouped.
//! Around every turn the [`cost_ledger`] prices the call and checks the budgets before the next
//! one, and the [`guardian`] reviews the turn (and any stall) and answers with hints or a stop.
//! Everything a run does is an [`event::Event`].
//!
//! Actors reach each other through [`supervision::ChildSlot`]s, so a restarted actor is found
//! by everyone at once. The [`store`] is append-only and repairs a turn cut off by a crash when
//! the session is next loaded.

pub mod callback;
pub mod checkpoint;
pub mod config;
pub mod context;
pub mod cost_ledger;
pub mod director;
pub mod engine;
pub mod event;
pub mod guardian;
pub mod guardrail;
pub use ryvos_protocol::ids;
pub mod interrupt;
pub mod judge;
pub mod llm_stream;
pub mod memory;
pub use ryvos_protocol::message;
pub mod provider;
pub mod root;
pub mod sandbox;
pub mod security;
pub mod session;
pub mod store;
pub mod supervision;
pub mod text;
pub mod tokens;
pub mod tool_executor;
pub mod tools;
pub mod workspace;

pub use engine::{Engine, EngineConfig, EngineError};
pub use event::{Event, EventKind, RunStatus};
pub use ids::{CallId, RunId, SessionId};
pub use message::{Message, ToolCall};
