//! Ryvos: a runtime for LLM agents.
//!
//! A run takes a prompt and drives the ReAct loop (ask the model, run the tools it calls, feed
//! the results back) until the model answers or a limit stops it. Every turn is checkpointed
//! in redb, so a crash loses no completed turn, and every step is published as an [`Event`].
//!
//! This crate is what a host application embeds: [`Runtime`] starts the engine (the supervised
//! actors of the engine), [`Runtime::run`] starts a run and returns a [`RunHandle`] that
//! streams its events and its [`RunOutcome`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), ryvos::RuntimeError> {
//! use ryvos::{Config, RunRequest, Runtime};
//! let runtime = Runtime::start(Config::default()).await?;
//! let outcome = runtime.run(RunRequest::new("list the Rust files here")).await?.outcome().await?;
//! println!("{}: {}", outcome.status, outcome.output);
//! runtime.shutdown().await?;
//! # Ok(()) }
//! ```

pub mod access;
pub mod config;
mod home;
pub mod protocol;
pub mod provider;
mod run_log;
mod runtime;
pub mod shared_store;
#[cfg(feature = "testing")]
pub mod testing;

pub use config::Config;
pub use home::{make_private as make_home_private, HomeError};
pub use run_log::read_session_logs;
pub use runtime::{
    EngineError, Interrupter, OnMessage, RewindError, RunHandle, RunOutcome, RunRequest,
    RunSettings, RunUpdate, Runtime, RuntimeBuilder, RuntimeError, StartRunError, UndoError,
};
/// The body of `ryvos-sandbox`, the sandbox's inner layer.
pub use ryvos_actors::sandbox_inner_main;
/// The calendar periods (UTC day and month) spending is totalled by.
pub use ryvos_actors::Period;
pub use ryvos_actors::Provider;
pub use ryvos_actors::{
    After, ApprovalError, Approvals, Before, CallIdentity, Effect, Guardrail, Tool, ToolContext,
    ToolError, Workspace, WorkspaceError,
};
/// The workspace snapshots behind `rewind` and `fork`: a snapshot of a directory's files, kept
/// by content, and brought back.
pub use ryvos_actors::{Restored, WorkspaceSnapshots};
/// How commands the model runs are confined (bubblewrap's namespaces, Landlock and seccomp
/// inside), as `[security.sandbox]` asks; where secrets live; what the machine offers.
pub use ryvos_actors::{Sandbox, SandboxMachine, SandboxSite};
pub use ryvos_protocol::event::{CallPurpose, Event, EventKind, RunStatus};
pub use ryvos_protocol::goal::{Constraints, Criterion, CriterionKind, Goal};
pub use ryvos_protocol::ids::{CallId, RunId, SessionId};
pub use ryvos_protocol::message::{Message, ToolCall};
pub use ryvos_protocol::records::{Answer, PendingApproval};
pub use ryvos_protocol::tier::SafetyTier;
pub use ryvos_protocol::verdict::Verdict;
pub use shared_store::SharedStore;
