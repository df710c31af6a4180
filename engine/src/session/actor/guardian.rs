//! How the loop is watched: the Guardian's reviews after each turn, the stall timer, and the
//! hints and stops they lead to.

use super::asking::ask;
use super::spending::Bill;
use super::{SessionMsg, SessionState};
use crate::event::{EventKind, RunStatus, StallPhase};
use crate::guardian::{GuardianMsg, Review};
use crate::ids::RunId;
use crate::provider::{ProviderError, Usage};
use crate::session::oversight;
use crate::session::run::{AfterBilling, Ending, Phase};
use ractor::ActorRef;
use std::time::Duration;

impl SessionState {
    /// Publishes a review's events and keeps its hint for the next request; returns its stop.
    pub(super) fn apply_review(&mut self, review: Review) -> Option<(RunStatus, String)> {
        let run = self.run.as_mut()?;
        for event in review.events {
            run.events.emit(event);
        }
        if let Some(hint) = review.hint {
            run.pending_hints.push(hint);
        }
        if review.watch.is_some() {
            run.guardian_watch = review.watch;
        }
        review.stop
    }

    /// Ends the run as the Guardian decided, with a summary of where it stood as its output.
    pub(super) fn stop_by_guardian(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        status: RunStatus,
        reason: String,
    ) {
        let Some(run) = self.run.as_ref() else { return };
        let mut output = format!("The run was stopped after {} turn(s): {reason}.", run.turns);
        if !run.last_text.is_empty() {
            output.push_str("\n\nThe model's last message:\n");
            output.push_str(&run.last_text);
        }
        if status == RunStatus::Failed {
            run.events.emit(EventKind::Error {
                message: reason.clone(),
            });
        }
        self.finish_with(
            myself,
            Ending {
                status,
                output,
                reason: Some(reason),
            },
        );
    }

    /// The conversation's size as the next request would carry it: counted, or (while no
    /// decision depends on it) bounded.
    pub(super) fn context_tokens(&self) -> u64 {
        let bound = self.history.total_tokens() + self.system_tokens();
        if self.is_counted() {
            return bound;
        }
        self.history
            .measured_tokens()
            .map_or(bound, |measured| measured.min(bound))
    }

    /// The system prompt's size: counted, or bounded.
    pub(super) fn system_tokens(&self) -> u64 {
        self.run
            .as_ref()
            .map_or(0, |r| r.system_size.tokens().into())
    }

    /// What the next request weighs, counted: the conversation, the system prompt and the
    /// tools' specs. A call cut after the server began answering is billed this much input.
    pub(super) fn request_tokens(&mut self) -> u64 {
        self.count_exactly();
        self.context_tokens() + self.services.registry.specs_tokens()
    }

    /// What the next request weighs, when every part of it is counted already.
    pub(super) fn counted_request_tokens(&self) -> Option<u64> {
        let counted = self.is_counted();
        counted.then(|| self.context_tokens() + self.services.registry.specs_tokens())
    }

    /// Looks for a stall of the dispatch made at `step` after the stall timeout, or after
    /// `after`.
    pub(super) fn schedule_stall_check(
        &self,
        myself: &ActorRef<SessionMsg>,
        step: u64,
        after: Option<Duration>,
    ) {
        let guardian = &self.services.agent.guardian;
        if guardian.enabled {
            let after = after.unwrap_or(Duration::from_secs(guardian.stall_timeout_secs.max(1)));
            myself.send_after(after, move || SessionMsg::StallCheck { step });
        }
    }

    /// The stall timer fired for the dispatch in flight: if nothing moved for the stall
    /// timeout, the Guardian is told (off the mailbox) and decides in
    /// [`Self::on_stall_reviewed`].
    pub(super) fn check_stall(&mut self, myself: &ActorRef<SessionMsg>, step: u64) {
        let timeout = self.stall_timeout();
        let Some(run) = self.run.as_ref() else { return };
        let (phase, tools) = match &run.phase {
            Phase::AwaitingModel => (StallPhase::Model, Vec::new()),
            Phase::RunningTools { calls } => (
                StallPhase::Tools,
                calls.iter().map(|c| c.name.clone()).collect(),
            ),
            // Waiting for the store has its own deadline.
            Phase::AwaitingDurability { .. } => {
                return self.schedule_stall_check(myself, step, None)
            }
            Phase::Summarizing { .. } => return self.check_summary_stall(myself, step),
            // A judged command has its own timeout, and so do the ledger and the Guardian.
            Phase::Preparing
            | Phase::BetweenTurns
            | Phase::Billing { .. }
            | Phase::Reviewing { .. }
            | Phase::Judging { .. }
            | Phase::Finishing(_) => return,
        };
        let silent = run.heartbeat.silent_for();
        if silent < timeout {
            return self.schedule_stall_check(myself, step, Some(timeout - silent));
        }
        let guardian = self.services.guardian.clone();
        let (session_id, run_id) = (self.id.clone(), run.id.clone());
        let report = oversight::report_stall(guardian, session_id, run_id, phase, silent, tools);
        ask(myself, report, move |review| SessionMsg::StallReviewed {
            step,
            review,
        });
    }

    /// The Guardian's answer to a stall (of the dispatch still in flight at `step`): a hint,
    /// the silent model call cut and made again, or a stop.
    pub(super) fn on_stall_reviewed(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        step: u64,
        review: Option<Review>,
    ) {
        let Some(review) = review else {
            return self.schedule_stall_check(myself, step, None);
        };
        // The same step means the same dispatch, so the phase is the one reported. A model
        // stream may have spoken (or ended) while the Guardian was asked.
        let spoke = self.run.as_ref().is_some_and(|r| {
            matches!(r.phase, Phase::AwaitingModel)
                && r.heartbeat.silent_for() < self.stall_timeout()
        });
        if spoke {
            return self.schedule_stall_check(myself, step, None);
        }
        let retry = review.retry_model_call;
        let stop = self.apply_review(review);
        let changed = self
            .run
            .as_ref()
            .is_some_and(|r| r.guardian_watch.is_some());
        if stop.is_none() && changed {
            self.submit(myself, None, None);
        }
        if let Some((status, reason)) = stop {
            return self.stop_by_guardian(myself, status, reason);
        }
        if retry {
            let Some(run) = &self.run else { return };
            run.call_cancel.cancel();
            // The cut call was paid for: its input at least, counted.
            let input_tokens = self.request_tokens();
            let Some(run) = &self.run else { return };
            let usage = Usage {
                input_tokens,
                output_tokens: 0,
            };
            let bill = Bill::estimated(run.turns + 1, &self.services.llm_model, usage);
            return self.bill_then(myself, vec![bill], AfterBilling::AskAgain);
        }
        if let Some(run) = &self.run {
            run.heartbeat.beat();
        }
        self.schedule_stall_check(myself, step, None);
    }

    fn stall_timeout(&self) -> Duration {
        Duration::from_secs(self.services.agent.guardian.stall_timeout_secs.max(1))
    }

    /// A summary call silent for the stall timeout is cut: the pruning goes on without its
    /// summary, so a hung summarizer can never hold the run.
    fn check_summary_stall(&mut self, myself: &ActorRef<SessionMsg>, step: u64) {
        let timeout = self.stall_timeout();
        let Some(run) = self.run.as_mut() else { return };
        let silent = run.heartbeat.silent_for();
        if silent < timeout {
            return self.schedule_stall_check(myself, step, Some(timeout - silent));
        }
        run.call_cancel.cancel();
        let Phase::Summarizing { cut, then } =
            std::mem::replace(&mut run.phase, Phase::BetweenTurns)
        else {
            return;
        };
        // The cut call was paid for: its input at least, estimated.
        let usage = Usage {
            input_tokens: cut.tokens,
            output_tokens: 0,
        };
        let bill = Bill::estimated(run.turns, &self.services.llm_model, usage);
        let error = ProviderError::StreamCut(format!("silent for {} s", silent.as_secs()));
        let then = AfterBilling::Summary {
            cut,
            then,
            result: Err(error),
        };
        self.bill_then(myself, vec![bill], then);
    }

    /// Tells the Guardian and the ledger a run is over, so they drop what they keep of it.
    pub(super) fn forget_run(&self, run_id: &RunId) {
        let ended = GuardianMsg::RunEnded {
            run_id: run_id.clone(),
        };
        if self.services.guardian.cast(ended).is_err() {
            tracing::debug!("the Guardian is down; a restarted one holds nothing of the run");
        }
        let ended = crate::cost_ledger::CostLedgerMsg::RunEnded {
            session_id: self.id.clone(),
            run_id: run_id.clone(),
        };
        if self.services.ledger.cast(ended).is_err() {
            tracing::debug!("the cost ledger is down; a restarted one holds nothing of the run");
        }
    }
}
