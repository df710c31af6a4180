//! How a run ends: whatever is running is stopped, calls that will never finish get results,
//! the end is committed, and `RunComplete` is published once it is durable.

use super::{next_step, SessionMsg, SessionState, FINAL_COMMIT_TIMEOUT};
use crate::event::{EventKind, RunEvents, RunStatus};
use crate::message::Message;
use crate::session::notice::SessionNotice;
use crate::session::run::{ActiveRun, Ending, Phase};
use ractor::ActorRef;

impl SessionState {
    pub(super) fn fail(&mut self, myself: &ActorRef<SessionMsg>, reason: String) {
        if let Some(run) = &self.run {
            run.events.emit(EventKind::Error {
                message: reason.clone(),
            });
        }
        self.finish(myself, RunStatus::Failed, Some(reason));
    }

    pub(super) fn finish(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        status: RunStatus,
        reason: Option<String>,
    ) {
        let output = self
            .run
            .as_ref()
            .map(|r| r.last_text.clone())
            .unwrap_or_default();
        self.finish_with(
            myself,
            Ending {
                status,
                output,
                reason,
            },
        );
    }

    /// Ends the run: stops what is running, records results for calls that will never finish,
    /// and commits the run's end. The run is reported once that commit is durable.
    pub(super) fn finish_with(&mut self, myself: &ActorRef<SessionMsg>, ending: Ending) {
        let Some(run) = self.run.as_mut() else { return };
        if matches!(run.phase, Phase::Finishing(_)) {
            return;
        }
        run.cancel.cancel();
        run.step = next_step();
        let step = run.step;
        let phase = std::mem::replace(&mut run.phase, Phase::Finishing(ending.clone()));
        let stopped = match phase {
            // Never started: a pause leaves them pending for the next run.
            Phase::AwaitingDurability { .. } if ending.status.pauses() => Vec::new(),
            Phase::AwaitingDurability { calls } | Phase::RunningTools { calls } => calls,
            _ => Vec::new(),
        };
        for call in stopped {
            self.history.push(Message::ToolResult {
                call_id: call.id,
                name: call.name,
                content: format!(
                    "execution_error: the call was stopped because the run ended ({})",
                    ending.status
                ),
                is_error: true,
            });
        }
        let held = self.run.as_mut().and_then(|r| r.held_prompt.take());
        if let Some(prompt) = held.filter(|p| !p.is_empty()) {
            if self.history.pending_calls().is_empty() {
                // Every call a paused run left has a result: the prompt can follow them.
                self.history.push(Message::user(prompt));
            } else if let Some(run) = &self.run {
                run.events.emit(EventKind::Warning {
                    message: "the run's prompt was not given to the model: it waited behind \
                              tool calls that are still pending; give it again when resuming"
                        .into(),
                });
            }
        }
        let Some(run) = self.run.as_ref() else { return };
        if ending.status.pauses() {
            let pending_calls: Vec<_> = self
                .history
                .pending_calls()
                .into_iter()
                .map(|c| c.id)
                .collect();
            run.events.emit(EventKind::Interrupt {
                reason: ending.reason.clone().unwrap_or_default(),
                pending_calls: pending_calls.clone(),
            });
            // Stored with the run's end: on reload these stay pending.
            self.paused_calls = pending_calls;
        }
        let checkpoint = self.turn_checkpoint(Vec::new());
        let record = self.run.as_ref().map(|r| r.record(Some(&ending)));
        self.submit(myself, checkpoint, record);
        myself.send_after(FINAL_COMMIT_TIMEOUT, move || {
            SessionMsg::FinalCommitTimeout { step }
        });
        self.advance(myself);
    }

    /// Reports the run's end: everything it wrote is durable (or could not be).
    pub(super) fn complete(&mut self, myself: &ActorRef<SessionMsg>) {
        // Only a run that is finishing completes; it is taken out only then.
        let Some(Phase::Finishing(ending)) = self.run.as_ref().map(|r| &r.phase) else {
            return;
        };
        let mut ending = ending.clone();
        let Some(run) = self.run.take() else { return };
        if let Some(e) = self.commits.take_error() {
            ending.status = RunStatus::Failed;
            ending.reason = Some(format!("the run's turns could not be stored: {e}"));
        }
        // The supervisor hears of the end before any subscriber does: a caller that starts the
        // next run on this session as soon as it sees RunComplete is queued behind this notice.
        if self
            .supervisor
            .send_message(SessionNotice::RunFinished {
                session_id: self.id.clone(),
                run_id: run.id.clone(),
            })
            .is_err()
        {
            tracing::warn!(session = %self.id, "the session supervisor is gone; a finished run was not reported to it");
        }
        self.forget_run(&run.id);
        report_end(&run.events, &ending, &run);
        self.release_lease();
        self.schedule_hibernation(myself);
    }
}

impl SessionState {
    /// Gives the session up once its run's end is stored, so that any daemon may run it next.
    fn release_lease(&self) {
        if self.services.store.node().is_none() {
            return;
        }
        let store = self.services.store.clone();
        let id = self.id.clone();
        tokio::spawn(async move {
            if let Err(e) = store.release(&id).await {
                tracing::warn!(session = %id, "{e}; the lease lapses on its own");
            }
        });
    }
}

fn report_end(events: &RunEvents, ending: &Ending, run: &ActiveRun) {
    events.emit(EventKind::RunComplete {
        status: ending.status,
        output: ending.output.clone(),
        turns: run.turns,
        input_tokens: run.usage.input_tokens,
        output_tokens: run.usage.output_tokens,
        cost_cents: Some(run.cost_microcents as f64 / 1_000_000.0),
        duration_ms: run.started.elapsed().as_millis() as u64,
        reason: ending.reason.clone(),
        truncated: ending.status == RunStatus::Completed && run.answer_cut,
    });
}
