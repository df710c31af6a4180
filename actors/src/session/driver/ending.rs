//! How a run ends: whatever is running is stopped, calls that will never finish get results,
//! the end is committed, and `RunComplete` is published once it is durable.

use super::{Driver, Ending};
use crate::event::{EventKind, RunStatus};
use crate::hooks::Step as HookStep;
use crate::ids::SessionId;
use crate::message::Message;
use crate::session::notice::{NoticeRef, SessionNotice};
use crate::session::run::ActiveRun;
use crate::session::turn::CallsInFlight;
use crate::session::Services;
use std::time::Duration;

/// How long a finished run may wait for its last commit before it is reported failed.
const FINAL_COMMIT_TIMEOUT: Duration = Duration::from_secs(30);

impl Driver {
    /// Ends the run with `ending` once everything it wrote is durable: how it ended.
    pub(super) async fn finish(&mut self, mut ending: Ending) -> Ending {
        self.run.cancel().cancel();
        if self.run.writes() {
            // Calls a stop cut short may have changed files: the last turn's point has them.
            self.snapshot_workspace().await;
            self.answer_calls_in_flight(&ending);
            self.give_held_prompt();
            if ending.status.pauses() {
                self.leave_calls_pending(&ending);
            }
            self.tell_end_to_hooks(&ending).await;
            let record = self.run.record(Some(&ending));
            self.close_turn(Vec::new(), Some(record));
            self.last_commits().await;
        }
        if let Some(e) = self.session.commits.take_error() {
            ending.status = RunStatus::Failed;
            ending.reason = Some(format!("the run's turns could not be stored: {e}"));
        }
        ending
    }

    /// The run's hooks are told it parked (`RunParked`) and that it ended (`SessionEnd`); what
    /// they said is stored with its end.
    async fn tell_end_to_hooks(&mut self, ending: &Ending) {
        if let Some(reason) = self.run.parked() {
            let reason = serde_json::to_value(reason).unwrap_or_default();
            let message = ending.reason.as_deref().unwrap_or_default();
            let reason = reason.as_str().unwrap_or_default();
            self.tell_hooks(HookStep::RunParked { reason, message })
                .await;
        }
        let status = ending.status.to_string();
        self.tell_hooks(HookStep::SessionEnd { status: &status })
            .await;
    }

    /// Calls that will never finish get results saying why; calls that never started stay
    /// pending when the run pauses.
    fn answer_calls_in_flight(&mut self, ending: &Ending) {
        let stopped = match self.run.turn_mut().take_calls() {
            // Never started: a pause leaves them pending for the next run.
            Some(CallsInFlight::AwaitingDurability(_)) if ending.status.pauses() => Vec::new(),
            Some(CallsInFlight::AwaitingDurability(calls) | CallsInFlight::Running(calls)) => calls,
            None => Vec::new(),
        };
        for call in stopped {
            self.session.history.push(Message::ToolResult {
                call_id: call.id,
                name: call.name,
                content: format!(
                    "execution_error: the call was stopped because the run ended ({})",
                    ending.status
                ),
                is_error: true,
            });
        }
    }

    /// A prompt held back behind the calls a paused run left follows them once every one has
    /// a result; otherwise the caller is told to give it again.
    fn give_held_prompt(&mut self) {
        let Some(prompt) = self.run.take_held_prompt().filter(|p| !p.is_empty()) else {
            return;
        };
        if self.session.history.pending_calls().is_empty() {
            self.session.history.push(Message::user(prompt));
        } else {
            self.run.events().emit(EventKind::Warning {
                message: "the run's prompt was not given to the model: it waited behind tool \
                          calls that are still pending; give it again when resuming"
                    .into(),
            });
        }
    }

    /// A paused run says which calls it leaves pending, and the session keeps them (stored
    /// with the run's end: on reload they stay pending). A call the output limit cut can never
    /// run: it is answered as cut now, as it would have been in the run, rather than left for
    /// a resume to find its arguments broken.
    fn leave_calls_pending(&mut self, ending: &Ending) {
        if self.run.turn().answer_cut() {
            let cut = self.session.history.pending_calls();
            let cut = cut
                .into_iter()
                .filter(|c| !crate::provider::replay::is_object(&c.arguments));
            for call in cut {
                self.session.history.push(Message::ToolResult {
                    call_id: call.id,
                    name: call.name,
                    content: crate::tool_executor::CUT_OFF.to_owned(),
                    is_error: true,
                });
            }
        }
        let pending_calls: Vec<_> = self
            .session
            .history
            .pending_calls()
            .into_iter()
            .map(|c| c.id)
            .collect();
        self.run.events().emit(EventKind::Interrupt {
            reason: ending.reason.clone().unwrap_or_default(),
            pending_calls: pending_calls.clone(),
        });
        self.session.paused_calls = pending_calls;
    }

    /// Waits for the run's last commits, at most [`FINAL_COMMIT_TIMEOUT`]; a failure among
    /// them is kept for the report.
    async fn last_commits(&mut self) {
        let commits = &mut self.session.commits;
        let confirmed = tokio::time::timeout(FINAL_COMMIT_TIMEOUT, async {
            while !commits.all_confirmed() {
                let result = commits.next().await;
                let confirmation = commits.confirmed(result);
                for turn in confirmation.durable_turns {
                    self.run.events().emit(EventKind::CheckpointSaved { turn });
                }
                if let Some(e) = confirmation.failure {
                    tracing::error!(session = %self.session.id, "commit failed: {e}");
                    self.session.needs_reload = true;
                    self.run.events().emit(EventKind::Error {
                        message: format!("the run's turns could not be stored: {e}"),
                    });
                }
            }
        })
        .await;
        if confirmed.is_err() {
            self.session
                .commits
                .failed(crate::store::StoreError::from_cause(
                    "committing the run's last turn",
                    format!("no confirmation within {FINAL_COMMIT_TIMEOUT:?}"),
                ));
        }
    }
}

/// A run that has ended, to be reported once its session is handed back.
pub(in crate::session) struct Ended {
    pub(super) run: ActiveRun,
    pub(super) ending: Ending,
    pub(super) session_id: SessionId,
    pub(super) supervisor: NoticeRef,
    pub(super) services: Services,
}

impl Ended {
    /// Reports the run's end: to the supervisor first (a caller that starts the next run on
    /// this session as soon as it sees `RunComplete` is queued behind this notice), then to
    /// the sibling actors, then to the run's subscribers; and gives the session up.
    pub(in crate::session) fn report(self) {
        let Ended {
            run,
            ending,
            session_id,
            supervisor,
            services,
        } = self;
        let finished = SessionNotice::RunFinished {
            session_id: session_id.clone(),
            run_id: run.id().clone(),
        };
        if supervisor.send_message(finished).is_err() {
            tracing::warn!(session = %session_id, "the session supervisor is gone; a finished run was not reported to it");
        }
        services.guardian.run_ended(run.id());
        services.ledger.run_ended(&session_id, run.id());
        if let Some(reason) = run.parked().filter(|_| ending.status == RunStatus::Parked) {
            run.events().emit(EventKind::RunParked {
                reason,
                message: ending.reason.clone().unwrap_or_default(),
            });
        }
        run.events().emit(EventKind::RunComplete {
            status: ending.status,
            output: ending.output.clone(),
            turns: run.turns(),
            input_tokens: run.spent().usage().input_tokens,
            output_tokens: run.spent().usage().output_tokens,
            cost_cents: Some(run.spent().cost_microcents() as f64 / 1_000_000.0),
            duration_ms: run.active_ms(),
            reason: ending.reason.clone(),
            truncated: ending.status == RunStatus::Completed && run.turn().answer_cut(),
            park_reason: run.parked().filter(|_| ending.status == RunStatus::Parked),
        });
        let store = services.store;
        if store.node().is_some() {
            // Given up once the run's end is stored, so that any daemon may run it next.
            tokio::spawn(async move {
                if let Err(e) = store.release(&session_id).await {
                    tracing::warn!(session = %session_id, "{e}; the lease lapses on its own");
                }
            });
        }
    }
}
