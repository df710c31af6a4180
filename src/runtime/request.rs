//! A run to start: its prompt, session, workspace, goal and how it is followed.

use super::RuntimeError;
use ryvos_actors::config::{McpConfig, McpServerConfig};
use ryvos_actors::{Interrupter, OnMessage, RunSettings, TraceParent};
use ryvos_protocol::goal::Goal;
use ryvos_protocol::ids::SessionId;
use ryvos_protocol::mcp::SessionMcpServer;
use ryvos_protocol::message::Message;
use ryvos_protocol::socket::RunParams;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// A run to start.
#[derive(Clone)]
pub struct RunRequest {
    /// Empty to continue the session without a new prompt (see [`RunRequest::continuing`]).
    pub prompt: String,
    /// Continue this session (its history is the run's context); a new session when `None`.
    pub session: Option<SessionId>,
    /// Where the file tools work. When `None`: the workspace the session last worked in, for a
    /// session that has one; else the current directory.
    pub workspace: Option<PathBuf>,
    /// Where the caller is: context files (`SOUL.md`, …) found here come before the
    /// workspace's and `$RYVOS_HOME`'s.
    pub caller_dir: Option<PathBuf>,
    /// For a goal-driven run: what the Judge holds its answers to.
    pub goal: Option<Goal>,
    /// Run as a Director: plan a graph of steps, then carry them out.
    pub director: bool,
    /// The caller reads and writes the run's files (an editor): the file tools ask it, with
    /// `FileRequested` events answered by [`crate::Runtime::answer_file`].
    pub editor_files: bool,
    /// MCP servers the caller brings for the session: its runs alone are offered their
    /// tools.
    pub mcp_servers: Vec<SessionMcpServer>,
    /// Shown each message the run adds; it may interrupt the run after any of them.
    pub on_message: Option<OnMessage>,
    /// The caller's W3C trace context: the run's span is a child of it.
    pub traceparent: Option<String>,
    /// The model and limits this run asks for over the configuration.
    pub settings: RunSettings,
}

/// What [`RunRequest::check`] read from a request that can run.
#[derive(Debug)]
pub(super) struct Checked {
    pub trace_parent: Option<TraceParent>,
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
}

impl RunRequest {
    /// Whether the request can run, wherever it runs (its workspace is checked where it does):
    /// its session id, goal, Director prompt, trace context and MCP servers; the trace context
    /// and the servers, parsed.
    pub(super) fn check(&self) -> Result<Checked, RuntimeError> {
        if let Some(id) = &self.session {
            if !SessionId::is_well_formed(id.as_str()) {
                return Err(RuntimeError::BadSessionId(id.to_string()));
            }
        }
        if let Some(goal) = &self.goal {
            goal.validate()?;
        }
        let settings = &self.settings;
        if settings
            .model
            .as_deref()
            .is_some_and(|m| m.trim().is_empty())
        {
            return Err(RuntimeError::BadRequest(
                "the run's model is empty: name a model, or leave it out".into(),
            ));
        }
        if settings.max_turns == Some(0) || settings.max_duration_secs == Some(0) {
            return Err(RuntimeError::BadRequest(
                "a run needs at least one turn and one second: max_turns and \
                 max_duration_secs must be above 0"
                    .into(),
            ));
        }
        let mcp_servers = self.session_servers()?;
        if self.director && self.prompt.trim().is_empty() {
            return Err(RuntimeError::BadRequest(
                "a Director run needs its task: give a prompt (the same task resumes its plan)"
                    .into(),
            ));
        }
        let trace_parent = (self.traceparent.as_deref())
            .map(TraceParent::parse)
            .transpose()
            .map_err(RuntimeError::BadRequest)?;
        Ok(Checked {
            trace_parent,
            mcp_servers,
        })
    }

    /// The MCP servers the caller brings, as configured servers are: checked as
    /// `[mcp.servers]` is (names, one of `command` and `url`, the URL).
    fn session_servers(&self) -> Result<BTreeMap<String, McpServerConfig>, RuntimeError> {
        let mut servers = serde_json::Map::new();
        for server in &self.mcp_servers {
            let mut config = serde_json::to_value(server)
                .map_err(|e| RuntimeError::BadRequest(format!("mcp_servers: {e}")))?;
            if let Some(fields) = config.as_object_mut() {
                fields.remove("name");
            }
            if servers.insert(server.name.clone(), config).is_some() {
                return Err(RuntimeError::BadRequest(format!(
                    "mcp_servers names '{}' twice: give each server its own name",
                    server.name
                )));
            }
        }
        let config = serde_json::json!({ "servers": servers });
        let parsed: McpConfig = serde_json::from_value(config)
            .map_err(|e| RuntimeError::BadRequest(format!("mcp_servers: {e}")))?;
        Ok(parsed.servers)
    }

    /// Whether the request can run, wherever it runs: a daemon checks a queued run before it
    /// takes it, so that a bad run is refused at once rather than when it is claimed.
    pub fn validate(&self) -> Result<(), RuntimeError> {
        self.check().map(drop)
    }

    /// A run of `prompt` on a new session in the current directory.
    pub fn new(prompt: impl Into<String>) -> Self {
        Self {
            prompt: prompt.into(),
            session: None,
            workspace: None,
            caller_dir: None,
            goal: None,
            director: false,
            editor_files: false,
            mcp_servers: Vec::new(),
            on_message: None,
            traceparent: None,
            settings: RunSettings::default(),
        }
    }

    /// The run `params` describe (a socket `run`, a queued run, or the command line's flags
    /// in-process: one road for all), on a new session; the caller names the session it
    /// goes on with, as it finds it (`params.session` as given, `params.resume` once it is
    /// known to exist).
    pub fn from_params(params: &RunParams) -> Self {
        let mut request = Self::new(params.prompt.clone());
        request.workspace = params.workspace.as_ref().map(PathBuf::from);
        request.caller_dir = params.cwd.as_ref().map(PathBuf::from);
        request.goal = params.goal.clone();
        request.traceparent = params.traceparent.clone();
        request.director = params.director;
        request.editor_files = params.editor_files;
        request.mcp_servers = params.mcp_servers.clone();
        request.settings = params.settings();
        request
    }

    /// Asks `model` (as `[model] model` would), on the configured provider's endpoint and keys,
    /// with the configured fallbacks after it.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.settings.model = Some(model.into());
        self
    }

    /// Stops the run after `turns` model calls (as `[agent] max_turns` would).
    pub fn max_turns(mut self, turns: u32) -> Self {
        self.settings.max_turns = Some(turns);
        self
    }

    /// Stops the run after `secs` seconds (as `[agent] max_duration_secs` would).
    pub fn max_duration_secs(mut self, secs: u64) -> Self {
        self.settings.max_duration_secs = Some(secs);
        self
    }

    /// Stops the run before the model call after it has spent `cents` (as
    /// `[budget] per_run_limit_cents` would; 0 is no limit).
    pub fn budget_cents(mut self, cents: u64) -> Self {
        self.settings.per_run_limit_cents = Some(cents);
        self
    }

    /// Traces the run as a child of the caller's span: `traceparent` is a W3C trace context
    /// (`00-<trace id>-<span id>-<flags>`).
    pub fn traceparent(mut self, traceparent: impl Into<String>) -> Self {
        self.traceparent = Some(traceparent.into());
        self
    }

    /// Continues `session` without a new prompt: the calls its last run left pending run
    /// first, and the turns since its last prompt count against `max_turns`.
    pub fn continuing(session: SessionId) -> Self {
        Self::new("").session(session)
    }

    /// Shows `callback` each message the run adds (its prompt, each answer, each tool result
    /// as it comes); calling [`Interrupter::interrupt`] pauses the run after that message
    /// (status `interrupted`). Calls not yet started stay pending for the next run.
    pub fn on_message(
        mut self,
        callback: impl Fn(&Message, &Interrupter) + Send + Sync + 'static,
    ) -> Self {
        self.on_message = Some(Arc::new(callback));
        self
    }

    /// Runs as a Director: the model plans a graph of steps, independent steps run
    /// concurrently in their own sessions, and the final answer is judged against the
    /// request's goal. On a session whose Director run was cut off, the stored plan is taken
    /// up where it stood.
    pub fn director(mut self) -> Self {
        self.director = true;
        self
    }

    /// Holds the run to `goal`: the Judge holds each final answer to it, and the run ends
    /// `completed` only when it accepts.
    pub fn goal(mut self, goal: Goal) -> Self {
        self.goal = Some(goal);
        self
    }

    /// Has the file tools read and write through the caller, who answers each
    /// `FileRequested` event with [`crate::Runtime::answer_file`] (an editor, whose unsaved
    /// buffers the run then sees).
    pub fn editor_files(mut self) -> Self {
        self.editor_files = true;
        self
    }

    /// Continues `session`.
    pub fn session(mut self, session: SessionId) -> Self {
        self.session = Some(session);
        self
    }

    /// Looks for context files in `dir` first.
    pub fn caller_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.caller_dir = Some(dir.into());
        self
    }

    /// Works in `dir` (a run on a session that worked elsewhere says so in `RunStarted`).
    pub fn workspace(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workspace = Some(dir.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str, command: Option<&str>, url: Option<&str>) -> SessionMcpServer {
        SessionMcpServer {
            name: name.into(),
            command: command.map(str::to_owned),
            args: Vec::new(),
            env: BTreeMap::new(),
            url: url.map(str::to_owned),
            headers: BTreeMap::new(),
        }
    }

    #[test]
    fn a_callers_mcp_servers_are_checked_as_configured_ones_are() {
        let mut request = RunRequest::new("go");
        request.mcp_servers = vec![server("files", Some("node"), None)];
        let servers = request.session_servers().unwrap();
        assert_eq!(servers["files"].command.as_deref(), Some("node"));
        for (bad, says) in [
            (server("a b", Some("x"), None), "server name"),
            (
                server("both", Some("x"), Some("http://h/")),
                "both command and url",
            ),
            (server("none", None, None), "neither command nor url"),
        ] {
            request.mcp_servers = vec![bad];
            let refused = request.check().unwrap_err().to_string();
            assert!(refused.contains(says), "{refused}");
        }
        request.mcp_servers = vec![server("twice", Some("x"), None); 2];
        let refused = request.session_servers().unwrap_err().to_string();
        assert!(refused.contains("twice"), "{refused}");
    }
}
