//! The embedding API: start a runtime, run prompts, follow their events, stop.

mod handle;
mod hooks;
mod parked;
mod request;
mod rewinds;

use crate::config::Config;
use crate::shared_store::SharedStore;
pub use handle::{RunHandle, RunUpdate};
pub use request::RunRequest;
use ryvos_actors::{
    ApprovalError, Approvals, Engine, EngineConfig, Guardrail, Provider, RecordingProvider,
    RunSpec, Sandbox, Tool, Workspace,
};
pub use ryvos_actors::{
    EngineError, Interrupter, OnMessage, RewindError, RunSettings, StartRunError, UndoError,
};
use ryvos_protocol::event::Event;
pub use ryvos_protocol::event::RunOutcome;
use ryvos_protocol::ids::{RunId, SessionId};
use ryvos_protocol::mcp::McpServerStatus;
use ryvos_protocol::records::{Answer, PendingApproval, SessionRecord};
use ryvos_protocol::report::CostReport;
use ryvos_protocol::socket::{CompactUndoResult, HistoryMessage, HistoryResult};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::broadcast;

/// Why the runtime could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("the workspace: {0}")]
    Workspace(#[from] ryvos_actors::WorkspaceError),
    #[error("'{0}' is not a usable session id: use letters, digits, '_' and '-' (at most 128)")]
    BadSessionId(String),
    #[error("the run's event stream closed before the run reported its end")]
    RunLost,
    #[error("starting the run logger: {0}")]
    RunLog(std::io::Error),
    #[error("the goal: {0}")]
    BadGoal(#[from] ryvos_protocol::goal::CriterionError),
    #[error("{0}")]
    BadRequest(String),
    #[error("recording the model traffic: {0}")]
    Recording(ryvos_actors::ProviderError),
    #[error("this home's daemon id ($RYVOS_HOME/node): {0}")]
    Node(std::io::Error),
    #[error(transparent)]
    Home(#[from] crate::home::HomeError),
    #[error("there is no run {0} that is parked or in flight: `ryvos sessions` lists each session's latest run")]
    NoSuchRun(String),
    #[error("{0}")]
    NotParked(String),
}

/// A running Ryvos runtime: the actor system, its store and its tools.
pub struct Runtime {
    pub(crate) engine: Engine,
    run_log: std::thread::JoinHandle<()>,
    /// `[budget]`, which a parked run's continue is checked against.
    budget: ryvos_actors::config::BudgetConfig,
    /// Who may use the HTTP door; one for the runtime, so the link key is read once.
    access: crate::access::Access,
}

/// How long `close` waits for the run logger to write what it has.
const RUN_LOG_DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Sets up a [`Runtime`] before it starts.
pub struct RuntimeBuilder {
    config: Config,
    tools: Vec<Arc<dyn Tool>>,
    guardrails: Vec<Arc<dyn Guardrail>>,
    provider: Option<Arc<dyn Provider>>,
    record_to: Option<PathBuf>,
}

impl RuntimeBuilder {
    /// Adds a tool of the host application's, next to the built-in ones.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds a guardrail around every model call: it may pass, transform or block the request,
    /// and pass or block the answer; a block ends the run `blocked`.
    pub fn guardrail(mut self, guardrail: Arc<dyn Guardrail>) -> Self {
        self.guardrails.push(guardrail);
        self
    }

    /// Uses `provider` instead of the one `[model]` describes.
    pub fn provider(mut self, provider: Arc<dyn Provider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Records every model request and its answer to `path` (JSON lines), to replay later
    /// with `[model] provider = "replay"`.
    pub fn record_model_traffic(mut self, path: impl Into<PathBuf>) -> Self {
        self.record_to = Some(path.into());
        self
    }

    /// Starts the runtime. Run logs go to `$RYVOS_HOME/logs/`.
    pub async fn start(self) -> Result<Runtime, RuntimeError> {
        // Private whoever makes it first: a run in-process as much as the daemon.
        for path in crate::home::make_private(&self.config.home)? {
            tracing::warn!(
                "{} was open to other users; it is private now",
                path.display()
            );
        }
        let logs = self.config.logs_dir();
        let provider = match (self.provider, &self.record_to) {
            (provider, None) => provider,
            (provider, Some(path)) => Some(recording(provider, &self.config, path)?),
        };
        let config = EngineConfig {
            database: self.config.database_path(),
            node: node_id(&self.config.home).map_err(RuntimeError::Node)?,
            store: self.config.store,
            home: self.config.home.clone(),
            config_file: self.config.source.clone(),
            model: self.config.model,
            agent: self.config.agent,
            budget: self.config.budget.clone(),
            embedding: self.config.embedding,
            security: self.config.security,
            guardrails: self.config.guardrails,
            supervision: self.config.supervision,
            mcp: self.config.mcp,
            otel: self.config.otel,
            max_in_flight_runs: self.config.daemon.max_in_flight_runs,
            rewind: self.config.rewind.clone(),
            hooks: self.config.hooks.clone(),
        };
        let engine = match provider {
            Some(provider) => {
                Engine::start_with_provider(config, provider, self.tools, self.guardrails).await?
            }
            None => Engine::start(config, self.tools, self.guardrails).await?,
        };
        let run_log =
            crate::run_log::spawn(logs, engine.subscribe()).map_err(RuntimeError::RunLog)?;
        Ok(Runtime {
            access: crate::access::Access::new(engine.store().clone()),
            engine,
            run_log,
            budget: self.config.budget,
        })
    }
}

/// This home's name among daemons sharing a store, made once and kept in `$RYVOS_HOME/node`:
/// one process at a time runs on a home, so a daemon back from a crash is the same daemon.
fn node_id(home: &Path) -> std::io::Result<String> {
    let path = home.join("node");
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => return Ok(id.trim().to_owned()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let id = format!("d_{}", ulid::Ulid::new().to_string().to_lowercase());
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)?
        .write_all(format!("{id}\n").as_bytes())?;
    Ok(id)
}

/// `provider` (or the one `[model]` describes) with its traffic recorded to `path`.
fn recording(
    provider: Option<Arc<dyn Provider>>,
    config: &Config,
    path: &Path,
) -> Result<Arc<dyn Provider>, RuntimeError> {
    let inner = match provider {
        Some(provider) => provider,
        None => {
            ryvos_actors::provider_from_config(&config.model).map_err(RuntimeError::Recording)?
        }
    };
    let recorder = RecordingProvider::create(inner, path).map_err(RuntimeError::Recording)?;
    Ok(Arc::new(recorder))
}

impl Runtime {
    /// A builder with the built-in tools.
    pub fn builder(config: Config) -> RuntimeBuilder {
        RuntimeBuilder {
            config,
            tools: ryvos_actors::builtin_tools(),
            guardrails: Vec::new(),
            provider: None,
            record_to: None,
        }
    }

    /// Starts a runtime with the built-in tools and the provider `[model]` describes.
    pub async fn start(config: Config) -> Result<Runtime, RuntimeError> {
        Self::builder(config).start().await
    }

    /// Starts a run. Its events are followed from the first one through the handle.
    pub async fn run(&self, request: RunRequest) -> Result<RunHandle, RuntimeError> {
        let request::Checked {
            trace_parent,
            mcp_servers,
        } = request.check()?;
        let recorded = match &request.session {
            Some(id) => self.session(id).await?,
            None => None,
        };
        // The run checks it too; refused before it starts, a queued run is not tried again.
        if let Some(why) = recorded
            .as_ref()
            .and_then(SessionRecord::refused_while_parked)
        {
            return Err(RuntimeError::BadRequest(why));
        }
        let workspace = match request.workspace {
            Some(dir) => Workspace::new(&dir)?,
            None => default_workspace(recorded.as_ref())?,
        };
        // Every command would be refused there: said now, before a model is asked anything.
        if let Some(refused) = self.engine.sandbox().workspace_refusal(workspace.root()) {
            return Err(RuntimeError::BadRequest(refused.to_string()));
        }
        let mut settings = request.settings;
        if let (None, Some(record)) = (&settings.model, &recorded) {
            settings.model = self.session_model(&record.session_id).await?;
        }
        let spec = RunSpec {
            prompt: request.prompt,
            workspace,
            caller_dir: request.caller_dir,
            // What the caller gives is the user's own: its commands run without approval.
            goal: request.goal.map(|g| Arc::new(g.from_user())),
            on_message: request.on_message,
            editor_files: request.editor_files,
            mcp_servers,
            session_tools: None,
            trace_parent,
            settings,
            directed_by: None,
            continues: None,
        };
        let ticket = if request.director {
            self.engine.start_director(request.session, spec)?
        } else {
            self.engine.start_run(request.session, spec).await?
        };
        Ok(RunHandle::of(ticket))
    }

    /// The model the latest run of `session` was given for itself, if it was given one: a
    /// resumed session goes on with it (as codex and goose do), not with the configured model.
    async fn session_model(&self, session: &SessionId) -> Result<Option<String>, RuntimeError> {
        let runs = (self.engine.store().session_runs(session).await).map_err(EngineError::from)?;
        let latest = runs.into_iter().max_by_key(|run| run.started_at_ms);
        Ok(latest.and_then(|run| run.settings.model))
    }

    /// Pauses the run in flight on `session` after its current step (status `interrupted`);
    /// whether there was one. Resuming the session runs the calls it left pending first.
    pub async fn interrupt(&self, session: &SessionId) -> Result<bool, RuntimeError> {
        Ok(self
            .engine
            .interrupt_run(session, "the run was interrupted")
            .await?)
    }

    /// Stops the run in flight on `session` for good (status `cancelled`); whether there was
    /// one. Its completed turns stay stored.
    pub async fn cancel(&self, session: &SessionId) -> Result<bool, RuntimeError> {
        Ok(self
            .engine
            .cancel_run(session, "the run was cancelled")
            .await?)
    }

    /// The approval requests, to answer from another task.
    pub fn approvals(&self) -> Approvals {
        self.engine.approvals().clone()
    }

    /// The tool calls waiting for a person's approval, oldest first.
    pub fn pending_approvals(&self) -> Vec<PendingApproval> {
        self.engine.approvals().pending()
    }

    /// Answers approval request `request_id` on behalf of `by` (who answered, for the audit).
    pub async fn answer_approval(
        &self,
        request_id: &str,
        approved: bool,
        reason: Option<String>,
        by: &str,
    ) -> Result<(), ApprovalError> {
        let answer = Answer {
            approved,
            reason,
            by: by.to_owned(),
            always: false,
        };
        self.engine.answer_approval(request_id, answer).await
    }

    /// Answers file request `request_id` (a `FileRequested` event of a run started with
    /// [`RunRequest::editor_files`]): the file's text for a read (`None` for a write done), or
    /// why the editor could not. Whether it was waiting (not answered, given up on, or
    /// ended with its run).
    pub fn answer_file(&self, request_id: &str, answer: Result<Option<String>, String>) -> bool {
        self.engine.answer_file(request_id, answer)
    }

    /// Answers approval request `request_id` as `answer` says: an approval `always` allows
    /// the same call for the rest of its session too ([`Self::approve_always`]).
    pub async fn answer(&self, request_id: &str, answer: Answer) -> Result<(), ApprovalError> {
        let answer = Answer {
            always: answer.approved && answer.always,
            ..answer
        };
        self.engine.answer_approval(request_id, answer).await
    }

    /// Approves `request_id` and the same call (the tool; for bash, the command) for the rest
    /// of its session, never a T4 one. Recorded in the audit as such.
    pub async fn approve_always(
        &self,
        request_id: &str,
        reason: Option<String>,
        by: &str,
    ) -> Result<(), ApprovalError> {
        let answer = Answer {
            approved: true,
            reason,
            by: by.to_owned(),
            always: true,
        };
        self.engine.answer_approval(request_id, answer).await
    }

    /// Follows run `run` of `session` from now on: its next events, and its end. A run that
    /// has ended already is never seen to end: read its record first.
    pub fn follow(&self, session: &SessionId, run: &RunId) -> RunHandle {
        RunHandle::following(session.clone(), run.clone(), self.subscribe())
    }

    /// Every event of every run from now on. A subscriber that falls far behind misses the
    /// oldest events rather than slowing any run.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.engine.subscribe()
    }

    /// The configured MCP servers' states, once each has started or failed once (at most its
    /// `startup_timeout_secs`).
    pub async fn mcp_servers(&self) -> Vec<McpServerStatus> {
        self.engine.mcp().settled().await;
        self.mcp_servers_now()
    }

    /// The configured MCP servers' states as they are now (some may still be starting).
    pub fn mcp_servers_now(&self) -> Vec<McpServerStatus> {
        self.engine.mcp().reports()
    }

    /// How commands the model runs are confined here.
    pub fn sandbox(&self) -> &Sandbox {
        self.engine.sandbox()
    }

    /// How many runs this runtime has in flight.
    pub fn runs_in_flight(&self) -> usize {
        self.engine.runs_in_flight()
    }

    /// The runs this runtime has in flight, the oldest first.
    pub fn runs_in_flight_listed(&self) -> Vec<ryvos_protocol::socket::RunInFlight> {
        self.engine.runs_in_flight_listed()
    }

    /// The store's backend (`redb`, `postgres`), for status and logs.
    pub fn store_backend(&self) -> &'static str {
        self.engine.store().backend()
    }

    /// Why the store cannot write, while it cannot (it recovers when the fault clears).
    pub fn store_fault(&self) -> Option<String> {
        self.engine.store().fault()
    }

    /// How the store's connections are secured (encrypted, the server verified), for a store
    /// reached over a network; `None` for a local file.
    pub fn store_security(&self) -> Option<String> {
        self.engine.store().security()
    }

    /// Who may use the HTTP door: tokens, console sessions, approval links' key.
    pub fn access(&self) -> &crate::access::Access {
        &self.access
    }

    /// The store as daemons share it: the run queue, leases and the relay between daemons.
    pub fn shared_store(&self) -> SharedStore {
        SharedStore(self.engine.store().clone())
    }

    /// Every session's record, most recently updated first.
    pub async fn sessions(&self) -> Result<Vec<SessionRecord>, RuntimeError> {
        let mut sessions = self
            .engine
            .store()
            .sessions()
            .await
            .map_err(EngineError::from)?;
        sessions.sort_by_key(|s| std::cmp::Reverse(s.updated_at_ms));
        Ok(sessions)
    }

    /// Session `id`'s record, if the session exists.
    pub async fn session(&self, id: &SessionId) -> Result<Option<SessionRecord>, RuntimeError> {
        Ok(self
            .engine
            .store()
            .session_record(id)
            .await
            .map_err(EngineError::from)?)
    }

    /// Session `id`'s messages, runs and security decisions; `None` if there is no such session.
    pub async fn history(&self, id: &SessionId) -> Result<Option<HistoryResult>, RuntimeError> {
        let store = self.engine.store();
        let history = store.load_session(id).await.map_err(EngineError::from)?;
        let Some(session) = history.record else {
            return Ok(None);
        };
        let messages = history
            .messages
            .into_iter()
            .map(|m| HistoryMessage {
                seq: m.seq,
                tokens: m.tokens,
                message: m.message,
            })
            .collect();
        Ok(Some(HistoryResult {
            session,
            messages,
            runs: store.session_runs(id).await.map_err(EngineError::from)?,
            audit: store.audit(id).await.map_err(EngineError::from)?,
            compaction: history.compaction,
            turns: rewinds::numbered(store.checkpoints(id).await.map_err(EngineError::from)?),
        }))
    }

    /// Sets session `id`'s context window back to before its last compaction: the messages it
    /// took out (still in the store) are sent to the model again from its next run on. Refused
    /// while a run is in flight on the session, and when there is nothing to undo; whether the
    /// restored window fits the budget is in the answer.
    pub async fn undo_compaction(&self, id: &SessionId) -> Result<CompactUndoResult, RuntimeError> {
        let undone = self.engine.undo_compaction(id).await?;
        Ok(CompactUndoResult {
            session_id: id.to_string(),
            first_kept_seq: undone.first_kept_seq,
            restored_messages: undone.restored_messages,
            context_tokens: undone.context_tokens,
            max_context_tokens: undone.max_context_tokens,
            fits: undone.fits,
        })
    }

    /// Spending this month against the budget's limits, per day and per session.
    pub async fn cost_report(&self) -> Result<CostReport, RuntimeError> {
        Ok(self.engine.cost_report().await?)
    }

    /// True while the actor system is up.
    pub fn is_running(&self) -> bool {
        self.engine.is_running()
    }

    /// Resolves once the actor system has stopped (after `shutdown`, or when a failing actor
    /// escalated past the restart intensity).
    pub async fn stopped(&self) {
        self.engine.stopped().await
    }

    /// Pauses the runs in flight (status `interrupted`), waits until everything they wrote is
    /// durable, and stops. The database file stays open until the `Runtime` is dropped.
    pub async fn shutdown(&self) -> Result<(), RuntimeError> {
        Ok(self.engine.shutdown().await?)
    }

    /// Shuts down, then releases everything: the database is closed and the run logs are
    /// written out before this returns.
    pub async fn close(self) -> Result<(), RuntimeError> {
        let stopped = self.shutdown().await;
        let Runtime {
            engine, run_log, ..
        } = self;
        // Dropping the engine closes the event stream, which ends the logger.
        drop(engine);
        let joined = tokio::task::spawn_blocking(move || run_log.join());
        if tokio::time::timeout(RUN_LOG_DRAIN, joined).await.is_err() {
            tracing::warn!("the run logger did not finish within {RUN_LOG_DRAIN:?}");
        }
        stopped
    }
}

/// Where a run given no workspace works: its session's own (where its history's files are),
/// else the current directory.
fn default_workspace(session: Option<&SessionRecord>) -> Result<Workspace, RuntimeError> {
    match session.and_then(|s| s.workspace.as_deref()) {
        Some(dir) => Workspace::new(Path::new(dir)).map_err(|e| {
            RuntimeError::BadRequest(format!(
                "the session's workspace {dir} cannot be used ({e}); give another workspace"
            ))
        }),
        None => Ok(Workspace::new(
            &std::env::current_dir().unwrap_or_else(|_| ".".into()),
        )?),
    }
}
