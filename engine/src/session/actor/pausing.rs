//! How a run pauses and how the next one picks up: an interrupt (from outside, or from the
//! host's message callback) or `max_turns` ends the run after its current step, leaving the
//! calls it asked for and never started without results; the next run on the session
//! executes them before anything else, then takes its prompt and goes on.

use super::{SessionMsg, SessionState};
use crate::event::RunStatus;
use crate::message::Message;
use crate::session::run::Phase;
use crate::store::{Write, WriteBatch};
use ractor::ActorRef;

impl SessionState {
    /// An interrupt asked from outside. The run pauses after its current step: a model answer
    /// in flight is awaited, tools running finish (those not started stay pending). With
    /// `now` (the daemon is stopping) nothing is awaited: the answer in flight is dropped, and
    /// running tools are stopped and report why.
    pub(super) fn interrupt(&mut self, myself: &ActorRef<SessionMsg>, reason: String, now: bool) {
        let Some(run) = self.run.as_mut() else { return };
        run.interrupter.interrupt(reason);
        match run.phase {
            Phase::Finishing(_) => {}
            // Nothing is in flight: the calls waiting for durability have not started.
            Phase::AwaitingDurability { .. } | Phase::BetweenTurns => {
                self.pause_if_interrupted(myself);
            }
            // The batch reports the calls that ran; the run pauses when it does.
            Phase::RunningTools { .. } => {
                if now {
                    run.cancel.cancel();
                }
            }
            // An answer is awaited (what the first call needs, the model's, the Judge's, the
            // ledger's receipt or the Guardian's review of the finished turn); the run pauses
            // once it is in.
            Phase::Preparing
            | Phase::AwaitingModel
            | Phase::Summarizing { .. }
            | Phase::Judging { .. }
            | Phase::Billing { .. }
            | Phase::Reviewing { .. } => {
                if now {
                    self.pause_if_interrupted(myself);
                }
            }
        }
    }

    /// Ends the run `interrupted` if an interrupt was asked for; whether it did.
    pub(super) fn pause_if_interrupted(&mut self, myself: &ActorRef<SessionMsg>) -> bool {
        let Some(reason) = self.run.as_ref().and_then(|r| r.interrupter.reason()) else {
            return false;
        };
        self.finish(myself, RunStatus::Interrupted, Some(reason));
        true
    }

    /// Ends the run `max_turns` if it has used them; whether it did. The calls of its last
    /// answer, if any, stay pending.
    pub(super) fn stop_at_max_turns(&mut self, myself: &ActorRef<SessionMsg>) -> bool {
        let max_turns = self.services.agent.max_turns;
        if self
            .run
            .as_ref()
            .is_none_or(|r| r.turns_before + r.turns < max_turns)
        {
            return false;
        }
        self.finish(
            myself,
            RunStatus::MaxTurns,
            Some(format!("the run reached max_turns ({max_turns})")),
        );
        true
    }

    /// Forgets the approval requests this session's paused runs left for calls that are not
    /// pending any more (they got results another way), in memory and in the store.
    pub(super) fn drop_stale_approvals(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        pending: &[crate::ids::CallId],
    ) {
        let stale = self.services.approvals.drop_paused(&self.id, pending);
        if stale.is_empty() {
            return;
        }
        let forget = stale.into_iter().map(|request_id| Write::Approval {
            request_id,
            kept: None,
        });
        let batch = WriteBatch::of(self.id.clone(), forget);
        self.submit_batch(myself, batch);
    }

    /// Appends the run's prompt (none when it continues without one), shown to the host first.
    pub(super) fn push_prompt(&mut self, prompt: String) {
        if prompt.is_empty() {
            return;
        }
        let message = Message::user(prompt);
        if let Some(run) = &self.run {
            run.observe(&message);
        }
        self.history.push(message);
    }

    /// The calls a paused run left have their results: the prompt follows them, the whole is
    /// stored, and the run makes its first call (after making room, if it must).
    pub(super) fn after_pending_calls(&mut self, myself: &ActorRef<SessionMsg>, prompt: String) {
        self.push_prompt(prompt);
        self.submit(myself, None, None);
        if let Some(run) = self.run.as_mut() {
            run.turn_first_seq = self.history.next_seq();
        }
        self.first_call(myself);
    }
}
