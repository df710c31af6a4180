//! The state of the run a session is driving.

use super::before::Before;
use super::model_call::ModelCall;
use super::oversight::Oversight;
use super::spent::Spending;
use super::turn::TurnInProgress;
use crate::event::{RunEvents, RunStatus};
use crate::ids::RunId;
use crate::interrupt::{Interrupter, OnMessage};
use crate::store::{now_ms, RunRecord};
use crate::tools::Workspace;
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

/// The run in flight.
pub(super) struct ActiveRun {
    pub id: RunId,
    pub prompt: String,
    pub events: RunEvents,
    pub workspace: Workspace,
    /// Where the run's programs run (its private temp dir lives as long as the run).
    pub sandbox: crate::sandbox::RunSandbox,
    /// The system prompt as the model gets it: `system_base`, then the goal's focus layer.
    pub system: Arc<str>,
    /// The system prompt without the focus layer (principles, context files, recall).
    pub system_base: Arc<str>,
    /// For a goal-driven run: its goal, and how the Judge has found it so far.
    pub goal: Option<Arc<crate::judge::Goal>>,
    pub cancel: CancellationToken,
    /// The models it asks, and the call in flight.
    pub call: ModelCall,
    pub limits: RunLimits,
    /// Set to pause the run after its current step (status `interrupted`).
    pub interrupter: Interrupter,
    /// The host's callback, shown each message the run adds.
    pub on_message: Option<OnMessage>,
    /// A prompt held back while the calls a paused run left are executed: their results must
    /// follow the answer that asked for them.
    pub held_prompt: Option<String>,
    /// Cancels `cancel` when the run is dropped, however that happens (a panicking actor too),
    /// so no stream or tool outlives its run.
    pub _cancel_on_drop: tokio_util::sync::DropGuard,
    pub started: Instant,
    pub started_at_ms: u64,
    /// What the run asked for over the configuration, kept in its record for its continues.
    pub settings: super::RunSettings,
    /// Why the run parks, once it does.
    pub parked: Option<ryvos_protocol::event::ParkReason>,
    /// For a Director's step: the Director run it serves.
    pub directed_by: Option<ryvos_protocol::records::DirectedBy>,
    /// Model calls answered so far.
    pub turns: u32,
    /// What the run brings from before it began (a parked run's time, earlier turns).
    pub before: Before,
    /// The run holds the session and writes to it (not so for a run that could not take it).
    pub writes: bool,
    /// What the run has spent, as the ledger priced it.
    pub spent: Spending,
    /// The turn in progress.
    pub turn: TurnInProgress,
    /// What the Guardian and the Judge keep of the run.
    pub oversight: Oversight,
    /// The model was asked to save memories since the last pruning.
    pub flush_prompted: bool,
    /// The system prompt's size (counted, or bounded), part of the context the token budget
    /// measures.
    pub system_size: crate::tokens::Size,
    /// The latest non-empty text the model gave in this run: the output of a run that ends
    /// before a final answer.
    pub last_text: String,
}

/// The limits a run runs under: the configuration's, with the run's own settings over them.
pub(crate) struct RunLimits {
    pub max_turns: u32,
    pub max_duration_secs: u64,
    /// The run's own spending limit in cents, when it set one (0: none).
    pub per_run_limit_cents: Option<u64>,
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
}

impl ActiveRun {
    /// A run about to make its first call, asking the configured models until it is begun.
    pub(super) fn new(
        id: RunId,
        prompt: String,
        events: RunEvents,
        workspace: Workspace,
        services: &super::Services,
        limits: RunLimits,
        next_seq: u64,
    ) -> ActiveRun {
        let system: Arc<str> = Arc::from("");
        let cancel = CancellationToken::new();
        let sandbox = (services.sandbox)
            .for_run(&workspace)
            .publishing(events.clone());
        let models = services.models.configured().clone();
        ActiveRun {
            id,
            prompt,
            events,
            sandbox,
            workspace,
            system_size: crate::tokens::size_text(&system),
            system_base: system.clone(),
            system,
            call: ModelCall::new(models, &cancel),
            limits,
            goal: None,
            interrupter: Interrupter::default(),
            on_message: None,
            held_prompt: None,
            cancel: cancel.clone(),
            _cancel_on_drop: cancel.drop_guard(),
            started: Instant::now(),
            started_at_ms: now_ms(),
            settings: Default::default(),
            parked: None,
            directed_by: None,
            turns: 0,
            before: Before::default(),
            writes: false,
            spent: Spending::default(),
            turn: TurnInProgress::starting_at(next_seq),
            oversight: Oversight::default(),
            flush_prompted: false,
            last_text: String::new(),
        }
    }

    /// Takes up the run `parked` left: its prompt, its turns and what it spent so far, so
    /// that limits and totals count across its continues.
    pub(super) fn take_up(&mut self, parked: &RunRecord) {
        self.prompt = parked.prompt.clone();
        self.turns = parked.turns;
        self.spent = Spending::taken_up(parked);
        self.started_at_ms = parked.started_at_ms;
        self.last_text = parked.output.clone();
        self.before = Before::parked(parked);
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
        }
    }

    /// Gives the run its system prompt (the goal's focus layer follows it).
    pub(super) fn set_system(&mut self, system: Arc<str>) {
        self.system_size = crate::tokens::size_text(&system);
        self.system_base = system.clone();
        self.system = system;
        self.refocus(None);
    }

    /// Rewrites the focus layer with where the evaluation stands.
    pub(super) fn refocus(&mut self, status: Option<&str>) {
        if let Some(goal) = &self.goal {
            let system = format!(
                "{}\n\n{}",
                self.system_base,
                crate::judge::goal::focus(goal, status)
            );
            self.system_size = crate::tokens::size_text(&system);
            self.system = system.into();
        }
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
        }
    }
}
