//! A run as it is asked for: the socket's `run` (and `submit`) parameters, which a queued run
//! keeps and the command line builds for a run in-process too, and the settings a run asks for
//! over the configuration, which its record keeps.

use crate::goal::Goal;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `run`'s parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunParams {
    /// Empty continues the session given by `resume` without a new prompt.
    pub prompt: String,
    /// Use (or create) this session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Continue this session, which must exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<String>,
    /// The directory the file tools work in (absolute, on the daemon's machine). Left out
    /// when resuming a session, the session's own workspace; for a new session, `cwd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The client's current directory (absolute): context files found there come first, and
    /// a new session given no `workspace` works there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Makes the run goal-driven.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<Goal>,
    /// Runs as a Director: a planned graph of steps.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub director: bool,
    /// The caller reads and writes files for the run (an editor, with its unsaved buffers):
    /// the file tools ask it with `file_requested` events, answered by `file_answer`. Only for
    /// `run`, whose caller follows the run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub editor_files: bool,
    /// MCP servers the caller brings for the session: started by the daemon (kept while the
    /// session's runs name the same ones, stopped after 10 idle minutes), their tools offered
    /// to this session's runs alone. Only for `run`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<crate::mcp::SessionMcpServer>,
    /// The caller's W3C trace context (`00-<trace id>-<span id>-<flags>`): with `[otel]` on,
    /// the run's span is a child of the caller's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The config file the caller means the run to use (an absolute path): a daemon running
    /// on another one refuses the run (`config_mismatch`) rather than use its own silently.
    /// Only for `run`: a queued run is hosted by whichever daemon claims it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// Ask this model (as `[model] model` would), on the daemon's configured provider, its
    /// keys and its fallbacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Stop after this many model calls (as `[agent] max_turns` would; at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_turns: Option<u32>,
    /// Stop after this many seconds (as `[agent] max_duration_secs` would; at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_duration_secs: Option<u64>,
    /// This run's spending limit in cents (as `[budget] per_run_limit_cents` would; 0 is
    /// none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_run_limit_cents: Option<u64>,
    /// What the run does at its budget or the month's limit (as `[budget] on_limit` would):
    /// `park` (the default) or `stop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_limit: Option<OnLimit>,
}

impl RunParams {
    /// A run of `prompt` in `workspace`, every option left out.
    pub fn new(prompt: impl Into<String>, workspace: impl Into<String>) -> Self {
        Self {
            prompt: prompt.into(),
            session: None,
            resume: None,
            workspace: Some(workspace.into()),
            cwd: None,
            goal: None,
            director: false,
            editor_files: false,
            mcp_servers: Vec::new(),
            traceparent: None,
            config: None,
            model: None,
            max_turns: None,
            max_duration_secs: None,
            per_run_limit_cents: None,
            on_limit: None,
        }
    }

    /// What the run asks for over the daemon's configuration.
    pub fn settings(&self) -> RunSettings {
        RunSettings {
            model: self.model.clone(),
            max_turns: self.max_turns,
            max_duration_secs: self.max_duration_secs,
            per_run_limit_cents: self.per_run_limit_cents,
            on_limit: self.on_limit,
        }
    }

    /// The same run, asking for `settings` over the daemon's configuration.
    pub fn with_settings(self, settings: RunSettings) -> Self {
        Self {
            model: settings.model,
            max_turns: settings.max_turns,
            max_duration_secs: settings.max_duration_secs,
            per_run_limit_cents: settings.per_run_limit_cents,
            on_limit: settings.on_limit,
            ..self
        }
    }
}

/// What one run asks for over the configuration. Each is the run's own; `None` keeps the
/// configured value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RunSettings {
    /// The model to ask (`[model] model`): on the configured provider's endpoint and keys,
    /// with the configured fallbacks after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `[agent] max_turns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// `[agent] max_duration_secs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration_secs: Option<u64>,
    /// `[budget] per_run_limit_cents` (0: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_run_limit_cents: Option<u64>,
    /// `[budget] on_limit`: what the run does at a budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_limit: Option<OnLimit>,
}

impl RunSettings {
    /// Nothing is asked over the configuration.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// What a run does when it reaches its per-run budget or the month's limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnLimit {
    /// It parks (status `parked`), its turns stored, until it is continued.
    #[default]
    Park,
    /// It ends (status `budget_exceeded`).
    Stop,
}
