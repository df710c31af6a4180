//! A run's driver: the run's whole life as one async task, in the order it happens.
//!
//! ```text
//! begin         take the session, ask the ledger, assemble the system prompt, store the prompt
//! left calls    run the calls a paused run left pending (their results come before the prompt)
//! loop {
//!   may call?   the ledger's last receipt, an interrupt, max_turns
//!   ask         the model, streaming (a stall is reported to the Guardian; a lost call is
//!               asked again), every attempt billed by the ledger
//!   answer      guardrails, appended; no calls: the Judge (goal-driven) or the end
//!   tools       after the turn is durable (if any call has side effects), run, results appended
//!   end turn    room made in the context, the Guardian's review, the turn stored, the Judge
//!               every few turns
//! }
//! finish        calls in flight answered, the end committed, reported once durable (a run
//!               parked at a budget ends here too, to go on later as the same run)
//! ```
//!
//! Every wait goes through [`Driver::wait`], which also hears the session's control channel
//! (stop, interrupt), the run's deadline and the store's confirmations; so a step never needs
//! to know what else may happen meanwhile. A step that ends the run returns its [`Ending`] as
//! the error of a [`Step`], and `?` carries it here.

mod asking;
mod context;
mod ending;
mod fitting;
mod guarding;
mod guardrails;
mod hooking;
mod judging;
mod marking;
mod parking;
mod sizing;
mod spending;
mod starting;
mod storing;
mod tools;
mod waiting;

pub(super) use ending::Ended;
pub(super) use waiting::Control;

use super::conversation::Conversation;
use super::run::{ActiveRun, Ending};
use super::RunSpec;
use crate::event::RunStatus;
use crate::ids::RunId;
use crate::llm_stream::ModelChain;
use crate::message::ToolCall;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::mpsc;

/// What a step gives: its value, or how the run ends.
type Step<T> = Result<T, Ending>;

/// One run, driven; see the module documentation.
pub(super) struct Driver {
    session: Conversation,
    run: ActiveRun,
    control: mpsc::UnboundedReceiver<Control>,
    deadline: waiting::Deadline,
    /// What the prompt's hooks gave to read with it, until the prompt is appended.
    prompt_context: Option<String>,
}

impl Driver {
    /// A driver for run `run_id` of `session`, started as `spec` says, asking `models`, and
    /// controlled through `control`.
    pub(super) fn new(
        session: Conversation,
        run_id: RunId,
        spec: &RunSpec,
        models: Arc<ModelChain>,
        control: mpsc::UnboundedReceiver<Control>,
    ) -> Self {
        let run = starting::new_run(&session, run_id, spec, models);
        let deadline = waiting::Deadline::of(&run);
        Self {
            session,
            run,
            control,
            deadline,
            prompt_context: None,
        }
    }

    /// Drives the run to its end; gives the session back, with the end to report once it is
    /// back (see [`Ended::report`]).
    pub(super) async fn drive(mut self, spec: RunSpec) -> (Conversation, Ended) {
        let ending = match self.live(spec).await {
            Ok(never) => match never {},
            Err(ending) => ending,
        };
        let ending = self.finish(ending).await;
        let ended = Ended {
            ending,
            session_id: self.session.id.clone(),
            supervisor: self.session.supervisor.clone(),
            services: self.session.services.clone(),
            run: self.run,
        };
        (self.session, ended)
    }

    /// The run, from its start to the end it reaches.
    async fn live(&mut self, spec: RunSpec) -> Step<Infallible> {
        let left = self.begin(spec).await?;
        if !left.is_empty() {
            self.run_left_calls(left).await?;
        }
        self.before_first_call().await?;
        loop {
            self.turn().await?;
        }
    }

    /// One turn: the model asked, its answer taken, its calls run, the turn ended.
    async fn turn(&mut self) -> Step<()> {
        self.may_call()?;
        let Some(reply) = self.ask_model().await? else {
            // Asked again: a stalled call was cut, or the context was made smaller.
            return Ok(());
        };
        let (text, calls) = self.take_answer(reply)?;
        if calls.is_empty() {
            return self.final_answer(text).await;
        }
        // A run that pauses here leaves the calls it was given pending, for the next run.
        self.pause_if_interrupted()?;
        self.stop_at_max_turns()?;
        let turn = self.run_tools(calls, false).await?;
        self.pause_if_interrupted()?;
        self.end_turn(turn).await
    }

    /// Whether another model call may be made: the last receipt allows it, no interrupt was
    /// asked for, and `max_turns` is not used up.
    fn may_call(&mut self) -> Step<()> {
        // Between turns nothing is in flight: a stop or an interrupt told meanwhile acts now.
        self.take_control()?;
        if let Some(refusal) = self.run.spent_mut().take_refusal() {
            // Announced as the receipt that refused it was applied.
            return Err(self.refused(refusal));
        }
        self.pause_if_interrupted()?;
        self.stop_at_max_turns()
    }

    /// Ends the run `interrupted` if an interrupt was asked for.
    fn pause_if_interrupted(&self) -> Step<()> {
        match self.run.interrupter().reason() {
            Some(reason) => Err(self.end(RunStatus::Interrupted, reason)),
            None => Ok(()),
        }
    }

    /// Ends the run `max_turns` once it has used them (a run continuing without a prompt
    /// counts the turns since the last prompt too).
    fn stop_at_max_turns(&self) -> Step<()> {
        let max_turns = self.run.limits().max_turns();
        if self.run.before().turns() + self.run.turns() < max_turns {
            return Ok(());
        }
        let reason = format!("the run reached max_turns ({max_turns})");
        Err(self.end(RunStatus::MaxTurns, reason))
    }

    /// An end with `status` and `reason`; its output is the model's latest text.
    fn end(&self, status: RunStatus, reason: String) -> Ending {
        Ending {
            status,
            output: self.run.last_text().to_owned(),
            reason: Some(reason),
        }
    }

    /// The run fails: said as an `Error` event, then ended `failed`.
    fn failure(&self, reason: String) -> Ending {
        self.run.events().emit(crate::event::EventKind::Error {
            message: reason.clone(),
        });
        self.end(RunStatus::Failed, reason)
    }

    /// The calls an answer asked for, as the Guardian reviews them.
    fn tool_names(calls: &[ToolCall]) -> Vec<String> {
        calls.iter().map(|c| c.name.clone()).collect()
    }
}
