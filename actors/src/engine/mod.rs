//! The engine: the actor tree started, addressed, and stopped as one.

#[cfg(feature = "testing")]
mod faults;
mod gauges;
mod hooks;
mod opening;
mod rewinding;

use opening::{open_store, opening_store};

use crate::checkpoint::{Checkpoint, Writer};
use crate::config::{
    AgentConfig, BudgetConfig, DirectorConfig, EmbeddingConfig, ModelConfig, SandboxMode,
    SecurityConfig, SupervisionConfig,
};
use crate::cost_ledger::CostLedgerArgs;
use crate::director::{Directing, Director, Directors};
use crate::event::{Event, GlobalEvents, RunStatus, SessionEvents};
use crate::guardian::{GuardianArgs, Thresholds};
use crate::guardrail::{Guardrail, GuardrailConfig, Patterns};
use crate::ids::{RunId, SessionId};
use crate::judge::JudgeArgs;
use crate::llm_stream::{ModelChain, ModelChains};
use crate::mcp::{McpHubArgs, McpServers};
use crate::memory::Memory;
use crate::provider::retry::RetryPolicy;
use crate::provider::{Provider, ProviderError};
use crate::root::{RootArgs, RootMsg, RootSupervisor, Slots, SupervisorNotice};
use crate::sandbox::{Sandbox, Site};
use crate::security::{ApprovalError, Approvals, Gate};
use crate::session::{
    RunSpec, RunTicket, RunsInFlight, Services, SessionSupervisorArgs, Sessions, StartRunError,
};
use crate::store::{Store, StoreError};
use crate::supervision::RestartPolicy;
use crate::telemetry::Telemetry;
use crate::tool_executor::{ExecutionSettings, ToolExecutorArgs};
use crate::tools::{RegistryError, Tool, ToolRegistry};
use ractor::{Actor, ActorRef};
use ryvos_protocol::report::CostReport;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// How long `shutdown` waits in all.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(90);

/// What the engine needs to start.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// The redb file (with `[store] backend = "redb"`).
    pub database: PathBuf,
    /// Which backend keeps the records.
    pub store: crate::config::StoreConfig,
    /// This process's name among the daemons sharing a PostgreSQL store: the same across
    /// restarts on one home, so that a daemon back from a crash takes its sessions at once.
    pub node: String,
    /// `$RYVOS_HOME`: the last place context files are looked for, and the daily logs.
    pub home: PathBuf,
    /// The config file these settings were read from, if any: unreadable for commands.
    pub config_file: Option<PathBuf>,
    pub model: ModelConfig,
    pub agent: AgentConfig,
    pub budget: BudgetConfig,
    pub embedding: EmbeddingConfig,
    pub security: SecurityConfig,
    pub guardrails: GuardrailConfig,
    pub supervision: SupervisionConfig,
    /// MCP servers whose tools the model may call.
    pub mcp: crate::config::McpConfig,
    /// OpenTelemetry export (`[otel]`).
    pub otel: crate::config::OtelConfig,
    /// Runs in flight past this are refused as busy.
    pub max_in_flight_runs: usize,
    /// Workspace snapshots for `rewind` and `fork` (`[rewind]`).
    pub rewind: crate::config::RewindConfig,
    /// The person's own hooks (`[hooks]`).
    pub hooks: crate::config::HooksConfig,
}

/// Why the engine could not start, run, or stop.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("the store: {0}")]
    Store(#[from] StoreError),
    #[error("the tools: {0}")]
    Tools(#[from] RegistryError),
    #[error("the model provider: {0}")]
    Provider(#[from] ProviderError),
    #[error("the memory: {0}")]
    Memory(String),
    #[error("the security policy: {0}")]
    Security(String),
    #[error("the actor system: {0}")]
    Actors(String),
    #[error("telemetry: {0}")]
    Telemetry(#[from] crate::telemetry::TelemetryError),
    #[error(transparent)]
    StartRun(#[from] StartRunError),
    #[error(transparent)]
    Undo(#[from] crate::session::UndoError),
    #[error("{0}")]
    Rewind(#[from] crate::session::RewindError),
    #[error("{0}")]
    Hooks(String),
}

/// A running engine.
pub struct Engine {
    root: ActorRef<RootMsg>,
    /// Turns true when the actor tree has stopped.
    stopped: watch::Receiver<bool>,
    slots: Slots,
    global_events: GlobalEvents,
    notices: broadcast::Sender<SupervisorNotice>,
    store: Store,
    /// The way to the store's writer.
    checkpoint: Checkpoint,
    budget: BudgetConfig,
    director: DirectorConfig,
    /// A run's longest time (`max_duration_secs`).
    max_run: Duration,
    /// The models runs ask.
    models: Arc<ModelChains>,
    /// Sessions a Director is running on.
    directing: Directors,
    /// Tool calls waiting for a person's approval.
    approvals: Approvals,
    /// File requests waiting for editors' answers.
    editor_requests: crate::editor::EditorRequests,
    /// The OS sandbox of the programs runs start.
    sandbox: Sandbox,
    /// The MCP servers' states.
    mcp: McpServers,
    /// The MCP servers callers brought for their sessions.
    session_servers: crate::mcp::SessionServers,
    /// How many runs are in flight.
    in_flight: RunsInFlight,
    /// Spans and metrics, while `[otel] enabled`.
    telemetry: Option<Arc<Telemetry>>,
    /// The person's own hooks, compiled.
    hooks: Arc<Vec<Arc<crate::hooks::Hook>>>,
}

impl Engine {
    /// Starts the engine with `config`'s provider, its fallbacks, and the given tools.
    pub async fn start(
        config: EngineConfig,
        tools: Vec<Arc<dyn Tool>>,
        guardrails: Vec<Arc<dyn Guardrail>>,
    ) -> Result<Self, EngineError> {
        let models = ModelChains::from_config(&config.model)?;
        Self::start_with_models(config, models, tools, guardrails).await
    }

    /// Starts the engine with a provider of the caller's (a test server, a replay, a custom
    /// client), retried as `[model]` says, without fallbacks.
    pub async fn start_with_provider(
        config: EngineConfig,
        provider: Arc<dyn Provider>,
        tools: Vec<Arc<dyn Tool>>,
        guardrails: Vec<Arc<dyn Guardrail>>,
    ) -> Result<Self, EngineError> {
        let chain = ModelChain::new(vec![provider], RetryPolicy::from_config(&config.model));
        let models = ModelChains::fixed(Arc::new(chain));
        Self::start_with_models(config, models, tools, guardrails).await
    }

    /// Starts the engine asking `models`.
    ///
    /// Long because it is the composition root: every actor's arguments are built here, in the
    /// order they depend on each other, so the whole wiring reads top to bottom in one place.
    async fn start_with_models(
        config: EngineConfig,
        models: ModelChains,
        tools: Vec<Arc<dyn Tool>>,
        mut guardrails: Vec<Arc<dyn Guardrail>>,
    ) -> Result<Self, EngineError> {
        if let Some(patterns) =
            Patterns::from_config(&config.guardrails).map_err(EngineError::Security)?
        {
            guardrails.push(patterns);
        }
        let models = Arc::new(models);
        let store = open_store(&config).await?;
        let slots = Slots::new();
        let in_flight = RunsInFlight::default();
        // One writer for the runtime's whole life: it outlives the checkpoint actor's failures.
        let writer = Writer::start(store.clone())
            .map_err(|e| EngineError::Actors(format!("starting the store's writer: {e}")))?;
        let checkpoint = Checkpoint::new(Arc::new(writer));
        let retries = RetryPolicy::from_config(&config.model);
        let memory = Memory::new(
            store.clone(),
            checkpoint.clone(),
            &config.embedding,
            &retries,
        )
        .map_err(|e| EngineError::Memory(e.to_string()))?;
        let approvals = Approvals::default();
        let editor_requests = crate::editor::EditorRequests::default();
        // Requests whose runs paused before the last stop can still be answered.
        approvals.restore(store.paused_approvals().await.map_err(opening_store)?);
        let registry = ToolRegistry::new(crate::memory::with_memory_tools(tools, &memory))?;
        // Calls a crash left in doubt are listed at once, the runs it cut off ended.
        let settled =
            crate::session::settle_at_start(&store, &registry, &approvals, config.agent.in_doubt);
        if let Err(e) = settled.await {
            tracing::warn!("the sessions a crash cut off could not be taken up: {e}");
        }
        let mcp = McpServers::new(&config.mcp);
        let session_servers =
            crate::mcp::SessionServers::new(registry.clone(), config.supervision.clone());
        let gate = Gate::new(
            &config.security,
            approvals.clone(),
            checkpoint.clone(),
            store.always_allowed().await.map_err(opening_store)?,
            // On a store of its own, the process is what tells one runtime from the next.
            &(store.node().map(str::to_owned))
                .unwrap_or_else(|| format!("pid {}", std::process::id())),
        )
        .map_err(EngineError::Security)?;
        let site = Site {
            ryvos_home: config.home.clone(),
            config_file: config.config_file.clone(),
            ..Site::default()
        }
        .with_vars_of(&(&config.model, &config.embedding, &config.mcp))
        .with_vars_of(&(&config.store, &config.otel));
        let sandbox = Sandbox::new(&config.security.sandbox, site)
            .map_err(|e| EngineError::Security(e.to_string()))?;
        match sandbox.unenforceable() {
            Some(_) => tracing::error!("sandbox: {}", sandbox.describe()),
            None if sandbox.mode() == SandboxMode::Off => {
                tracing::warn!("sandbox: {}", sandbox.describe())
            }
            None => tracing::info!("sandbox: {}", sandbox.describe()),
        }
        let agent = Arc::new(config.agent.clone());
        let telemetry =
            Telemetry::start(&config.otel, tokio::runtime::Handle::current())?.map(Arc::new);
        let global_events = GlobalEvents::new().traced(telemetry.clone());
        let policy = RestartPolicy::from(&config.supervision);
        let notices = broadcast::channel(64).0;
        let hooks = crate::hooks::configured(&config.hooks).map_err(EngineError::Security)?;
        let services = Services {
            store: store.clone(),
            checkpoint: checkpoint.clone(),
            ledger: slots.ledger.clone(),
            guardian: slots.guardian.clone(),
            llm: slots.llm.clone(),
            judge: slots.judge.clone(),
            model_retries: config.model.max_retries,
            home: config.home.clone(),
            memory: memory.clone(),
            tools: slots.tools.clone(),
            registry: registry.clone(),
            sandbox: sandbox.clone(),
            agent: agent.clone(),
            budget: Arc::new(config.budget.clone()),
            guardrails: Arc::new(guardrails),
            approvals: approvals.clone(),
            editor_requests: editor_requests.clone(),
            global_events: global_events.clone(),
            mcp: mcp.clone(),
            snapshots: crate::rewind::Snapshots::new(&config.home, &config.rewind)
                .map_err(EngineError::Security)?,
            hooks: hooks.clone(),
        };
        let judges = crate::judge::models(&config.model, &agent.judge, models.configured())?;
        let local_models = models
            .configured()
            .local_models()
            .chain(judges.local_models())
            .map(str::to_owned)
            .collect();
        let args = RootArgs {
            ledger: CostLedgerArgs {
                store: store.clone(),
                checkpoint: checkpoint.clone(),
                budget: config.budget.clone(),
                local_models,
            },
            guardian: GuardianArgs {
                store: store.clone(),
                checkpoint: checkpoint.clone(),
                thresholds: Thresholds::new(&agent.guardian, agent.max_context_tokens),
            },
            judge: JudgeArgs {
                models: judges,
                config: agent.judge.clone(),
                gate: gate.clone(),
            },
            tools: ToolExecutorArgs {
                gate,
                settings: ExecutionSettings {
                    parallel: agent.parallel_tools,
                    max_parallel: agent.max_parallel_tools,
                    timeout: Duration::from_secs(agent.tool_timeout_secs.max(1)),
                    max_output_bytes: agent.max_tool_output_bytes.max(256),
                },
            },
            mcp: McpHubArgs {
                config: config.mcp.clone(),
                registry: registry.clone(),
                servers: mcp.clone(),
                supervision: config.supervision.clone(),
            },
            sessions: SessionSupervisorArgs {
                services,
                policy: policy.clone(),
                max_in_flight_runs: config.max_in_flight_runs.max(1),
                in_flight: in_flight.clone(),
            },
            policy,
            checkpoint: checkpoint.clone(),
            slots: slots.clone(),
            notices: notices.clone(),
        };
        let (root, root_done) = Actor::spawn(None, RootSupervisor, args)
            .await
            .map_err(|e| EngineError::Actors(e.to_string()))?;
        let (stopped_tx, stopped) = watch::channel(false);
        tokio::spawn(crate::tokens::release_when_idle(stopped.clone()));
        if let Some(telemetry) = &telemetry {
            let (runs, waiting) = (in_flight.clone(), approvals.clone());
            gauges::observe(telemetry, runs, waiting, store.clone(), stopped.clone());
        }
        tokio::spawn(async move {
            if let Err(e) = root_done.await {
                tracing::error!("the root supervisor's task failed: {e}");
            }
            stopped_tx.send_replace(true);
        });
        Ok(Self {
            root,
            stopped,
            slots,
            global_events,
            notices,
            store,
            checkpoint,
            budget: config.budget,
            director: config.agent.director.clone(),
            max_run: config.agent.max_duration(),
            models,
            directing: Arc::default(),
            approvals,
            editor_requests,
            sandbox,
            mcp,
            session_servers,
            in_flight,
            telemetry,
            hooks,
        })
    }

    /// Starts a run on `session` (a new session when `None`). The ticket's event receiver was
    /// subscribed before the run began, so it sees every event of the run.
    pub async fn start_run(
        &self,
        session: Option<SessionId>,
        mut spec: RunSpec,
    ) -> Result<RunTicket, EngineError> {
        let models = self.models_for(&spec)?;
        let session = match spec.mcp_servers.is_empty() {
            true => session,
            false => {
                let session = session.unwrap_or_else(SessionId::generate);
                let tools = (self.session_servers.tools_for(&session, &spec.mcp_servers))
                    .await
                    .map_err(StartRunError::Spawn)?
                    .ok_or_else(|| StartRunError::SessionBusy(session.clone()))?;
                spec.session_tools = Some(tools);
                Some(session)
            }
        };
        Ok(self.sessions().start(session, spec, models).await?)
    }

    /// The models a run asks, as its settings chose them: resolved once, here, so a run whose
    /// settings cannot be honoured is refused before it starts.
    fn models_for(&self, spec: &RunSpec) -> Result<Arc<ModelChain>, StartRunError> {
        self.models
            .asking(spec.settings.model.as_deref())
            .map_err(StartRunError::Settings)
    }

    /// Starts a Director run on `session` (a new session when `None`): the model plans a graph
    /// of steps, they run, and the goal is judged (see [`crate::director`]). A session with an
    /// unfinished plan (its Director run was cut off) takes it up where it stood.
    pub fn start_director(
        &self,
        session: Option<SessionId>,
        spec: RunSpec,
    ) -> Result<RunTicket, EngineError> {
        let models = self.models_for(&spec)?;
        let session_id = session.unwrap_or_else(SessionId::generate);
        // One Director per session: two would take up the same plan.
        let Some((directing, stop)) = Directing::claim(&self.directing, &session_id) else {
            return Err(StartRunError::SessionBusy(session_id).into());
        };
        // A parked Director run goes on under its own id.
        let run_id =
            (spec.continues.as_ref()).map_or_else(RunId::generate, |c| c.parked.run_id.clone());
        let stream = SessionEvents::new(self.global_events.clone());
        let events = stream.subscribe();
        let director = Director {
            runs: self.sessions(),
            models,
            checkpoint: self.checkpoint.clone(),
            store: self.store.clone(),
            config: self.director.clone(),
            max_run: spec
                .settings
                .max_duration_secs
                .map_or(self.max_run, Duration::from_secs),
            stop,
        };
        let publisher = stream.for_run_under(
            session_id.clone(),
            run_id.clone(),
            spec.trace_parent.as_ref(),
        );
        // Every step's run is a child of the Director's run.
        let spec = RunSpec {
            trace_parent: publisher
                .trace()
                .map(|t| t.as_parent())
                .or(spec.trace_parent),
            ..spec
        };
        let session = directing.session().clone();
        tokio::spawn(director.run(session, spec, publisher, directing));
        Ok(RunTicket {
            session_id,
            run_id,
            events,
        })
    }

    /// Ends the run in flight on `session` with status `cancelled`; whether there was one.
    /// On a Director's session, the Director stops and cancels its steps.
    pub async fn cancel_run(&self, session: &SessionId, reason: &str) -> Result<bool, EngineError> {
        if Directing::stop(&self.directing, session, RunStatus::Cancelled, reason) {
            return Ok(true);
        }
        Ok(self
            .sessions()
            .stop(session, RunStatus::Cancelled, reason)
            .await?)
    }

    /// The session supervisor's handle.
    fn sessions(&self) -> Sessions {
        Sessions::new(self.slots.sessions.clone())
    }

    /// Pauses the run in flight on `session` after its current step (status `interrupted`):
    /// the calls it asked for and did not start stay pending, and the next run on the session
    /// executes them first. Whether a run was in flight. On a Director's session, the Director
    /// pauses with its steps; the same task again takes them up.
    pub async fn interrupt_run(
        &self,
        session: &SessionId,
        reason: &str,
    ) -> Result<bool, EngineError> {
        if Directing::stop(&self.directing, session, RunStatus::Interrupted, reason) {
            return Ok(true);
        }
        Ok(self
            .sessions()
            .stop(session, RunStatus::Interrupted, reason)
            .await?)
    }

    /// Answers approval request `request_id`. A request whose run is paused keeps the answer,
    /// in the store too, for the session's next run.
    pub async fn answer_approval(
        &self,
        request_id: &str,
        answer: crate::security::Answer,
    ) -> Result<(), ApprovalError> {
        let crate::security::Answered::Kept(request) = self.approvals.answer(request_id, answer)?
        else {
            return Ok(());
        };
        let batch = crate::store::WriteBatch::of(
            request.session_id.clone(),
            [crate::store::Write::Approval {
                request_id: request_id.to_owned(),
                kept: Some(*request),
            }],
        );
        crate::checkpoint::store(&self.checkpoint, batch)
            .await
            .map_err(|e| ApprovalError::NotStored(request_id.to_owned(), e.to_string()))
    }

    /// Answers file request `request_id` (a `FileRequested` event) with the file's text (or
    /// `None` for a write done), or why the editor could not; whether it was waiting.
    pub fn answer_file(&self, request_id: &str, answer: crate::editor::EditorAnswer) -> bool {
        self.editor_requests.answer(request_id, answer)
    }

    /// The tool calls waiting for a person's approval, to list and answer.
    pub fn approvals(&self) -> &Approvals {
        &self.approvals
    }

    /// The OS sandbox of the programs runs start, as configured and as the kernel allows.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// The configured MCP servers' states.
    pub fn mcp(&self) -> &McpServers {
        &self.mcp
    }

    /// Every event of every session from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.global_events.subscribe()
    }

    /// What the root supervisor does about failed actors, from now on.
    pub fn supervisor_notices(&self) -> broadcast::Receiver<SupervisorNotice> {
        self.notices.subscribe()
    }

    /// How many runs are in flight (started, not yet ended).
    pub fn runs_in_flight(&self) -> usize {
        self.in_flight.count()
    }

    /// The runs in flight, the oldest first.
    pub fn runs_in_flight_listed(&self) -> Vec<ryvos_protocol::socket::RunInFlight> {
        self.in_flight.list()
    }

    /// The store, for reading sessions and runs.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Spending this month against the limits, per day and per session, as stored.
    pub async fn cost_report(&self) -> Result<CostReport, EngineError> {
        let now = crate::store::now_ms();
        crate::cost_ledger::cost_report(&self.store, &self.budget, now)
            .await
            .map_err(EngineError::Store)
    }

    /// True while the actor tree is up (it stops for good only when a child failed more often
    /// than the restart intensity allows, or at shutdown).
    pub fn is_running(&self) -> bool {
        !*self.stopped.borrow()
    }

    /// Resolves once the actor tree has stopped.
    pub async fn stopped(&self) {
        let mut stopped = self.stopped.clone();
        // An error means the watcher task is gone, which happens only after it sent `true`.
        if stopped.wait_for(|s| *s).await.is_err() {
            tracing::debug!("the engine's stop watcher ended");
        }
    }

    /// Pauses the runs in flight (status `interrupted`: each resumes with its session), waits
    /// until everything written is durable, and stops the actors.
    pub async fn shutdown(&self) -> Result<(), EngineError> {
        if !self.is_running() {
            return Ok(());
        }
        self.session_servers.stop_all();
        let result = ractor::call_t!(
            self.root,
            RootMsg::Shutdown,
            SHUTDOWN_TIMEOUT.as_millis() as u64
        );
        if tokio::time::timeout(SHUTDOWN_TIMEOUT, self.stopped())
            .await
            .is_err()
        {
            tracing::warn!("the actor tree did not stop in time");
        }
        if let Some(telemetry) = &self.telemetry {
            telemetry.clone().close().await;
        }
        match result {
            Ok(flushed) => Ok(flushed?),
            Err(e) => Err(EngineError::Actors(format!("shutdown did not finish: {e}"))),
        }
    }
}
