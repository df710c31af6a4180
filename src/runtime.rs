//! The embedding API: start a runtime, run prompts, follow their events, stop.

use crate::config::Config;
use futures_util::{Stream, StreamExt};
use ryvos_actors::TraceParent;
use ryvos_actors::{
    ApprovalError, Approvals, Engine, EngineConfig, EngineError, Guardrail, Provider,
    RecordingProvider, RunSpec, Tool, Workspace,
};
pub use ryvos_actors::{Interrupter, OnMessage};
pub use ryvos_protocol::event::RunOutcome;
use ryvos_protocol::event::{Event, EventKind};
use ryvos_protocol::goal::Goal;
use ryvos_protocol::ids::{RunId, SessionId};
use ryvos_protocol::message::Message;
use ryvos_protocol::records::{Answer, PendingApproval, SessionRecord};
use ryvos_protocol::report::CostReport;
use ryvos_protocol::socket::{HistoryMessage, HistoryResult};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::broadcast;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::BroadcastStream;

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
}

/// A running Ryvos runtime: the actor system, its store and its tools.
pub struct Runtime {
    pub(crate) engine: Engine,
    run_log: std::thread::JoinHandle<()>,
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
            budget: self.config.budget,
            embedding: self.config.embedding,
            security: self.config.security,
            guardrails: self.config.guardrails,
            supervision: self.config.supervision,
            mcp: self.config.mcp,
            otel: self.config.otel,
            max_in_flight_runs: self.config.daemon.max_in_flight_runs,
        };
        let engine = match provider {
            Some(provider) => {
                Engine::start_with_provider(config, provider, self.tools, self.guardrails).await?
            }
            None => Engine::start(config, self.tools, self.guardrails).await?,
        };
        let run_log =
            crate::run_log::spawn(logs, engine.subscribe()).map_err(RuntimeError::RunLog)?;
        Ok(Runtime { engine, run_log })
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
    std::fs::create_dir_all(home)?;
    let id = format!("d_{}", ulid::Ulid::new().to_string().to_lowercase());
    std::fs::write(&path, format!("{id}\n"))?;
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
        let trace_parent = request.check()?;
        let workspace = match request.workspace {
            Some(dir) => Workspace::new(&dir)?,
            None => Workspace::new(&std::env::current_dir().unwrap_or_else(|_| ".".into()))?,
        };
        let spec = RunSpec {
            prompt: request.prompt,
            workspace,
            caller_dir: request.caller_dir,
            // What the caller gives is the user's own: its commands run without approval.
            goal: request.goal.map(|g| Arc::new(g.from_user())),
            on_message: request.on_message,
            trace_parent,
        };
        let ticket = if request.director {
            self.engine.start_director(request.session, spec)?
        } else {
            self.engine.start_run(request.session, spec).await?
        };
        Ok(RunHandle {
            session_id: ticket.session_id,
            run_id: ticket.run_id,
            events: BroadcastStream::new(ticket.events),
            ended: false,
        })
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

    /// Every event of every run from now on. A subscriber that falls far behind misses the
    /// oldest events rather than slowing any run.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.engine.subscribe()
    }

    /// The configured MCP servers' states, once each has started or failed once (at most its
    /// `startup_timeout_secs`).
    pub async fn mcp_servers(&self) -> Vec<ryvos_protocol::mcp::McpServerStatus> {
        self.engine.mcp().settled().await;
        self.engine.mcp().reports()
    }

    /// How the store's connections are secured (encrypted, the server verified), for a store
    /// reached over a network; `None` for a local file.
    pub fn store_security(&self) -> Option<String> {
        self.engine.store().security()
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
        }))
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
        let Runtime { engine, run_log } = self;
        // Dropping the engine closes the event stream, which ends the logger.
        drop(engine);
        let joined = tokio::task::spawn_blocking(move || run_log.join());
        if tokio::time::timeout(RUN_LOG_DRAIN, joined).await.is_err() {
            tracing::warn!("the run logger did not finish within {RUN_LOG_DRAIN:?}");
        }
        stopped
    }
}

/// A run to start.
#[derive(Clone)]
pub struct RunRequest {
    /// Empty to continue the session without a new prompt (see [`RunRequest::continuing`]).
    pub prompt: String,
    /// Continue this session (its history is the run's context); a new session when `None`.
    pub session: Option<SessionId>,
    /// Where the file tools work; the current directory when `None`.
    pub workspace: Option<PathBuf>,
    /// Where the caller is: context files (`SOUL.md`, …) found here come before the
    /// workspace's and `$RYVOS_HOME`'s.
    pub caller_dir: Option<PathBuf>,
    /// For a goal-driven run: what the Judge holds its answers to.
    pub goal: Option<Goal>,
    /// Run as a Director: plan a graph of steps, then carry them out.
    pub director: bool,
    /// Shown each message the run adds; it may interrupt the run after any of them.
    pub on_message: Option<OnMessage>,
    /// The caller's W3C trace context: the run's span is a child of it.
    pub traceparent: Option<String>,
}

impl RunRequest {
    /// Whether the request can run, wherever it runs (its workspace is checked where it does):
    /// its session id, goal, Director prompt and trace context; the trace context, parsed.
    pub(crate) fn check(&self) -> Result<Option<TraceParent>, RuntimeError> {
        if let Some(id) = &self.session {
            if !SessionId::is_well_formed(id.as_str()) {
                return Err(RuntimeError::BadSessionId(id.to_string()));
            }
        }
        if let Some(goal) = &self.goal {
            goal.validate()?;
        }
        if self.director && self.prompt.trim().is_empty() {
            return Err(RuntimeError::BadRequest(
                "a Director run needs its task: give a prompt (the same task resumes its plan)"
                    .into(),
            ));
        }
        self.traceparent
            .as_deref()
            .map(TraceParent::parse)
            .transpose()
            .map_err(RuntimeError::BadRequest)
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
            on_message: None,
            traceparent: None,
        }
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

    /// Works in `dir`.
    pub fn workspace(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workspace = Some(dir.into());
        self
    }
}

/// What a [`RunHandle`] yields, as a [`Stream`].
#[derive(Clone, Debug)]
pub enum RunUpdate {
    /// The run's next event; `RunComplete` is the last.
    Event(Arc<Event>),
    /// The reader fell behind the event buffer and missed this many events (counted over
    /// every run's events); the run itself goes on.
    Lagged(u64),
}

/// A run in flight: a [`Stream`] of its events (ending after `RunComplete`), or wait for its
/// [`RunOutcome`] with [`RunHandle::outcome`].
pub struct RunHandle {
    pub session_id: SessionId,
    pub run_id: RunId,
    events: BroadcastStream<Arc<Event>>,
    ended: bool,
}

impl Stream for RunHandle {
    type Item = RunUpdate;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<RunUpdate>> {
        if self.ended {
            return Poll::Ready(None);
        }
        loop {
            let update = match self.events.poll_next_unpin(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => None,
                Poll::Ready(Some(Ok(event))) if event.run_id != self.run_id => continue,
                Poll::Ready(Some(Ok(event))) => Some(RunUpdate::Event(event)),
                Poll::Ready(Some(Err(BroadcastStreamRecvError::Lagged(n)))) => {
                    Some(RunUpdate::Lagged(n))
                }
            };
            self.ended = match &update {
                None => true,
                Some(RunUpdate::Event(event)) => {
                    matches!(event.kind, EventKind::RunComplete { .. })
                }
                Some(RunUpdate::Lagged(_)) => false,
            };
            return Poll::Ready(update);
        }
    }
}

impl RunHandle {
    /// The run's next event; `None` after `RunComplete`. Events missed by falling behind are
    /// skipped (with a warning in the log); see the [`Stream`] for them as items.
    pub async fn next_event(&mut self) -> Option<Arc<Event>> {
        loop {
            match self.next().await? {
                RunUpdate::Event(event) => return Some(event),
                RunUpdate::Lagged(n) => {
                    tracing::warn!(run = %self.run_id, "a run's reader fell behind and missed {n} events");
                }
            }
        }
    }

    /// Waits for the run to end.
    pub async fn outcome(mut self) -> Result<RunOutcome, RuntimeError> {
        while let Some(event) = self.next_event().await {
            if let Some(outcome) = RunOutcome::from_event(&event) {
                return Ok(outcome);
            }
        }
        Err(RuntimeError::RunLost)
    }
}
