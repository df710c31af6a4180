//! The state of the run a session is driving.

use super::before::Before;
use super::model_call::ModelCall;
use super::oversight::Oversight;
use super::spent::Spending;
use super::system_prompt::SystemPrompt;
use super::turn::TurnInProgress;
use super::RunSpec;
use crate::event::{RunEvents, RunStatus};
use crate::ids::RunId;
use crate::interrupt::{Interrupter, OnMessage};
use crate::llm_stream::{Heartbeat, ModelChain};
use crate::store::{now_ms, RunRecord};
use crate::tools::Workspace;
use ryvos_protocol::event::ParkReason;
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// How a run ends.
#[derive(Clone, Debug)]
pub(super) struct Ending {
    pub status: RunStatus,
    pub output: String,
    pub reason: Option<String>,
}

impl Ending {
    /// The run completed with `output`.
    pub(super) fn completed(output: String) -> Self {
        Self {
            status: RunStatus::Completed,
            output,
            reason: None,
        }
    }
}

/// The run in flight. Its fields are private: what is fixed when it starts is read through
/// its accessors, each part (the model call, the spending, the turn, the oversight, what it
/// brings from before, the system prompt) changes through its own methods, and the run's
/// progress through the few below.
pub(super) struct ActiveRun {
    id: RunId,
    prompt: String,
    events: RunEvents,
    workspace: Workspace,
    /// Where the run's programs run (its private temp dir lives as long as the run).
    sandbox: crate::sandbox::RunSandbox,
    /// For a goal-driven run: its goal, and how the Judge has found it so far.
    goal: Option<Arc<crate::judge::Goal>>,
    cancel: CancellationToken,
    limits: RunLimits,
    /// Set to pause the run after its current step (status `interrupted`).
    interrupter: Interrupter,
    /// The editor its file tools go through, when an editor started it.
    editor: Option<crate::editor::Editor>,
    /// The tools it is offered: the runtime's, and its session's MCP servers' when it has
    /// some.
    tools: crate::tools::ToolRegistry,
    /// Its session's MCP servers, held while it runs.
    session_tools: Option<crate::mcp::SessionTools>,
    /// The host's callback, shown each message the run adds.
    on_message: Option<OnMessage>,
    /// Cancels `cancel` when the run is dropped, however that happens (a panicking actor too),
    /// so no stream or tool outlives its run.
    _cancel_on_drop: tokio_util::sync::DropGuard,
    started: Instant,
    started_at_ms: u64,
    /// What the run asked for over the configuration, kept in its record for its continues.
    settings: super::RunSettings,
    /// For a Director's step: the Director run it serves.
    directed_by: Option<ryvos_protocol::records::DirectedBy>,
    /// The system prompt, and its size.
    system: SystemPrompt,
    /// The models it asks, and the call in flight.
    call: ModelCall,
    /// What the run brings from before it began (a parked run's time, earlier turns).
    before: Before,
    /// What the run has spent, as the ledger priced it.
    spent: Spending,
    /// The turn in progress.
    turn: TurnInProgress,
    /// What the Guardian and the Judge keep of the run.
    oversight: Oversight,
    /// Model calls answered so far.
    turns: u32,
    /// The latest non-empty text the model gave in this run: the output of a run that ends
    /// before a final answer.
    last_text: String,
    /// A prompt held back while the calls a paused run left are executed: their results must
    /// follow the answer that asked for them.
    held_prompt: Option<String>,
    /// The model was asked to save memories since the last pruning.
    flush_asked: bool,
    /// Why the run parks, once it does.
    parked: Option<ParkReason>,
    /// The run holds the session and writes to it (not so for a run that could not take it).
    writes: bool,
    /// The points a rewind can go back to.
    points: Points,
    /// Its hooks (none until it is prepared).
    hooks: crate::hooks::RunHooks,
    /// A `Stop` hook sent it back to work: it may once.
    sent_back: bool,
}

/// What a run knows of the points a rewind can go back to.
#[derive(Default)]
pub(super) struct Points {
    /// The session as the run found it.
    pub start: Option<ryvos_protocol::records::RewindPoint>,
    /// The workspace's latest snapshot.
    pub workspace: Option<ryvos_protocol::records::WorkspaceMark>,
}

/// The limits a run runs under: the configuration's, with the run's own settings over them.
pub(crate) struct RunLimits {
    max_turns: u32,
    max_duration_secs: u64,
    per_run_limit_cents: Option<u64>,
}

impl RunLimits {
    /// `agent`'s limits, with `settings` over them.
    pub(crate) fn new(agent: &crate::config::AgentConfig, settings: &super::RunSettings) -> Self {
        Self {
            max_turns: settings.max_turns.unwrap_or(agent.max_turns),
            max_duration_secs: settings
                .max_duration_secs
                .unwrap_or(agent.max_duration_secs),
            per_run_limit_cents: settings.per_run_limit_cents,
        }
    }

    /// The model calls the run may make since its last prompt.
    pub(crate) fn max_turns(&self) -> u32 {
        self.max_turns
    }

    /// How long the run may run, its parked time left out.
    pub(crate) fn max_duration_secs(&self) -> u64 {
        self.max_duration_secs
    }

    /// The run's own spending limit in cents, when it set one.
    pub(crate) fn per_run_limit_cents(&self) -> Option<u64> {
        self.per_run_limit_cents
    }
}

impl ActiveRun {
    /// The run `spec` asks for, asking `models`, about to make its first call; its events
    /// go to `events`, and its first turn begins at message `next_seq`.
    pub(super) fn new(
        id: RunId,
        spec: &RunSpec,
        events: RunEvents,
        models: Arc<ModelChain>,
        services: &super::Services,
        next_seq: u64,
    ) -> ActiveRun {
        let cancel = CancellationToken::new();
        let sandbox = (services.sandbox)
            .for_run(&spec.workspace)
            .publishing(events.clone());
        let editor = (spec.editor_files).then(|| {
            services
                .editor_requests
                .editor(events.clone(), cancel.clone())
        });
        let mut run = ActiveRun {
            id,
            prompt: spec.prompt.clone(),
            events,
            sandbox,
            workspace: spec.workspace.clone(),
            goal: spec.goal.clone(),
            limits: RunLimits::new(&services.agent, &spec.settings),
            interrupter: Interrupter::default(),
            editor,
            tools: (spec.session_tools.as_ref())
                .map_or_else(|| services.registry.clone(), |t| t.registry.clone()),
            session_tools: spec.session_tools.clone(),
            on_message: spec.on_message.clone(),
            call: ModelCall::new(models, &cancel),
            cancel: cancel.clone(),
            _cancel_on_drop: cancel.drop_guard(),
            started: Instant::now(),
            started_at_ms: now_ms(),
            settings: spec.settings.clone(),
            directed_by: spec.directed_by.clone(),
            system: SystemPrompt::default(),
            before: Before::default(),
            spent: Spending::default(),
            turn: TurnInProgress::starting_at(next_seq),
            oversight: Oversight::default(),
            turns: 0,
            last_text: String::new(),
            held_prompt: None,
            flush_asked: false,
            parked: None,
            writes: false,
            points: Points::default(),
            hooks: crate::hooks::RunHooks::default(),
            sent_back: false,
        };
        if let Some(continuation) = &spec.continues {
            run.take_up(&continuation.parked);
        }
        run
    }

    /// Takes up the run `parked` left: its prompt, its turns and what it spent so far, so
    /// that limits and totals count across its continues.
    fn take_up(&mut self, parked: &RunRecord) {
        self.prompt = parked.prompt.clone();
        self.turns = parked.turns;
        self.spent = Spending::taken_up(parked);
        self.started_at_ms = parked.started_at_ms;
        self.last_text = parked.output.clone();
        self.before = Before::parked(parked);
        self.points.start = parked.start.clone();
        self.points.workspace = parked.start.as_ref().and_then(|s| s.workspace.clone());
    }

    /// The directory the run works in.
    pub(super) fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// The points a rewind can go back to, as the run knows them.
    pub(super) fn points(&self) -> &Points {
        &self.points
    }

    pub(super) fn points_mut(&mut self) -> &mut Points {
        &mut self.points
    }

    /// The prompt this run gives the model: none for a continued run (its prompt is in the
    /// history already).
    pub(super) fn prompt_to_give(&self) -> &str {
        self.before.prompt_to_give(&self.prompt)
    }

    /// How long the run has run, its parked time left out.
    pub(super) fn active_ms(&self) -> u64 {
        self.before.active_ms() + self.started.elapsed().as_millis() as u64
    }

    /// What the run's tool calls (and `command` criteria) may use.
    pub(super) fn tool_context(
        &self,
        session_id: &crate::ids::SessionId,
    ) -> crate::tools::ToolContext {
        crate::tools::ToolContext {
            workspace: self.workspace.clone(),
            session_id: session_id.clone(),
            run_id: self.id.clone(),
            cancel: self.cancel.clone(),
            interrupt: self.interrupter.clone(),
            sandbox: self.sandbox.clone(),
            editor: self.editor.clone(),
            call: None,
            hooks: self.hooks.clone(),
        }
    }

    /// Its hooks.
    pub(super) fn hooks(&self) -> &crate::hooks::RunHooks {
        &self.hooks
    }

    pub(super) fn set_hooks(&mut self, hooks: crate::hooks::RunHooks) {
        self.hooks = hooks;
    }

    /// Whether a `Stop` hook sent it back to work already; from now on, it has.
    pub(super) fn send_back(&mut self) -> bool {
        std::mem::replace(&mut self.sent_back, true)
    }

    /// Whether a `Stop` hook sent it back to work.
    pub(super) fn sent_back(&self) -> bool {
        self.sent_back
    }

    /// Where its programs run.
    pub(super) fn sandbox(&self) -> &crate::sandbox::RunSandbox {
        &self.sandbox
    }

    /// A hook refused the prompt: it is kept nowhere, the run's record included.
    pub(super) fn withhold_prompt(&mut self) {
        self.prompt = "(withheld: a UserPromptSubmit hook refused it)".into();
    }

    /// Whether it is a Director's step.
    pub(super) fn is_directed(&self) -> bool {
        self.directed_by.is_some()
    }

    /// The tools the run is offered.
    pub(super) fn tools(&self) -> &crate::tools::ToolRegistry {
        &self.tools
    }

    /// How its session's own MCP servers stand, when it has some.
    pub(super) fn session_servers(&self) -> Option<&crate::mcp::McpServers> {
        self.session_tools.as_ref().map(|t| &t.status)
    }

    /// Gives the run its system prompt (the goal's focus layer follows it).
    pub(super) fn set_system(&mut self, base: Arc<str>) {
        self.system.set(base, self.goal.as_deref());
    }

    /// Rewrites the focus layer with where the evaluation stands.
    pub(super) fn refocus(&mut self, status: Option<&str>) {
        self.system.refocus(self.goal.as_deref(), status);
    }

    /// Counts the system prompt's size exactly.
    pub(super) fn count_system_exactly(&mut self) {
        self.system.count_exactly();
    }

    /// Shows `message` to the host's callback, which may interrupt the run.
    pub(super) fn observe(&self, message: &crate::message::Message) {
        crate::interrupt::observe(self.on_message.as_ref(), message, &self.interrupter);
    }

    /// The run's record in the store; `ending` is `None` while it is in flight.
    pub(super) fn record(&self, ending: Option<&Ending>) -> RunRecord {
        RunRecord {
            run_id: self.id.clone(),
            session_id: self.events.session_id().clone(),
            prompt: self.prompt.clone(),
            status: ending.map(|e| e.status),
            reason: ending.and_then(|e| e.reason.clone()),
            output: ending.map(|e| e.output.clone()).unwrap_or_default(),
            turns: self.turns,
            input_tokens: self.spent.usage().input_tokens,
            output_tokens: self.spent.usage().output_tokens,
            cost_microcents: self.spent.cost_microcents(),
            started_at_ms: self.started_at_ms,
            ended_at_ms: ending.map(|_| now_ms()),
            goal: self.goal.as_deref().cloned(),
            model: Some(self.call.model().to_owned()),
            park_reason: self
                .parked
                .filter(|_| ending.is_some_and(|e| e.status == RunStatus::Parked)),
            settings: self.settings.clone(),
            model_calls: self.spent.model_calls(),
            active_ms: self.active_ms(),
            directed_by: self.directed_by.clone(),
            start: self.points.start.clone(),
        }
    }
}

/// What is fixed when the run starts.
impl ActiveRun {
    pub(super) fn id(&self) -> &RunId {
        &self.id
    }

    /// Where the run's events go.
    pub(super) fn events(&self) -> &RunEvents {
        &self.events
    }

    pub(super) fn goal(&self) -> Option<&Arc<crate::judge::Goal>> {
        self.goal.as_ref()
    }

    pub(super) fn limits(&self) -> &RunLimits {
        &self.limits
    }

    pub(super) fn settings(&self) -> &super::RunSettings {
        &self.settings
    }

    /// Cancels everything the run has in flight.
    pub(super) fn cancel(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Pauses the run after its current step.
    pub(super) fn interrupter(&self) -> &Interrupter {
        &self.interrupter
    }

    /// The host's callback, shown each message the run adds.
    pub(super) fn on_message(&self) -> Option<&OnMessage> {
        self.on_message.as_ref()
    }
}

/// The run's parts, each changed through its own methods.
impl ActiveRun {
    pub(super) fn system(&self) -> &SystemPrompt {
        &self.system
    }

    pub(super) fn call(&self) -> &ModelCall {
        &self.call
    }

    pub(super) fn call_mut(&mut self) -> &mut ModelCall {
        &mut self.call
    }

    /// Starts a model call, cut with the run: its cancel and its heartbeat.
    pub(super) fn start_call(&mut self) -> (CancellationToken, Heartbeat) {
        self.call.start(&self.cancel)
    }

    pub(super) fn before(&self) -> &Before {
        &self.before
    }

    pub(super) fn before_mut(&mut self) -> &mut Before {
        &mut self.before
    }

    pub(super) fn spent(&self) -> &Spending {
        &self.spent
    }

    pub(super) fn spent_mut(&mut self) -> &mut Spending {
        &mut self.spent
    }

    pub(super) fn turn(&self) -> &TurnInProgress {
        &self.turn
    }

    pub(super) fn turn_mut(&mut self) -> &mut TurnInProgress {
        &mut self.turn
    }

    pub(super) fn oversight(&self) -> &Oversight {
        &self.oversight
    }

    pub(super) fn oversight_mut(&mut self) -> &mut Oversight {
        &mut self.oversight
    }
}

/// The run's progress.
impl ActiveRun {
    /// Model calls answered so far.
    pub(super) fn turns(&self) -> u32 {
        self.turns
    }

    /// A model call was answered: one turn more.
    pub(super) fn count_turn(&mut self) {
        self.turns += 1;
    }

    /// The model said `text`: the run's latest text, unless empty.
    pub(super) fn note_text(&mut self, text: &str) {
        if !text.is_empty() {
            self.last_text = text.to_owned();
        }
    }

    /// The latest non-empty text the model gave.
    pub(super) fn last_text(&self) -> &str {
        &self.last_text
    }

    /// Holds `prompt` back until the calls a paused run left have run.
    pub(super) fn hold_prompt(&mut self, prompt: String) {
        self.held_prompt = Some(prompt);
    }

    /// The prompt held back, if any (taken).
    pub(super) fn take_held_prompt(&mut self) -> Option<String> {
        self.held_prompt.take()
    }

    /// Whether the model was asked to save memories since the last pruning.
    pub(super) fn memory_flush_asked(&self) -> bool {
        self.flush_asked
    }

    /// The model was asked to save memories (`true`), or the context was pruned since
    /// (`false`).
    pub(super) fn set_memory_flush_asked(&mut self, asked: bool) {
        self.flush_asked = asked;
    }

    /// The run parks, for `reason`.
    pub(super) fn park_for(&mut self, reason: ParkReason) {
        self.parked = Some(reason);
    }

    /// Why the run parks, if it does.
    pub(super) fn parked(&self) -> Option<ParkReason> {
        self.parked
    }

    /// The run holds the session: what it appended is written at its end.
    pub(super) fn holds_session(&mut self) {
        self.writes = true;
    }

    /// Whether the run holds the session.
    pub(super) fn writes(&self) -> bool {
        self.writes
    }
}
