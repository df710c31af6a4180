//! How the Guardian watches the run: its review of each turn, and the stall watch on every
//! model call and tool batch, with the hints and stops they lead to.

use super::waiting::{OnInterrupt, Waited};
use super::{Driver, Ending, Step};
use crate::event::{EventKind, RunStatus, StallPhase};
use crate::guardian::Review;
use futures_util::FutureExt;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

impl Driver {
    /// Publishes a review's events and keeps its hint for the next request; returns its stop.
    pub(super) fn apply_review(&mut self, review: Review) -> Option<(RunStatus, String)> {
        let run = &mut self.run;
        for event in review.events {
            run.events().emit(event);
        }
        run.oversight_mut().reviewed(review.hint, review.watch);
        review.stop
    }

    /// The end of a run the Guardian stopped, with a summary of where it stood as its output.
    pub(super) fn stopped_by_guardian(&self, status: RunStatus, reason: String) -> Ending {
        let run = &self.run;
        let mut output = format!(
            "The run was stopped after {} turn(s): {reason}.",
            run.turns()
        );
        if !run.last_text().is_empty() {
            output.push_str("\n\nThe model's last message:\n");
            output.push_str(run.last_text());
        }
        if status == RunStatus::Failed {
            run.events().emit(EventKind::Error {
                message: reason.clone(),
            });
        }
        Ending {
            status,
            output,
            reason: Some(reason),
        }
    }

    /// Waits for `work` (a model call, or a tool batch running `tools`), reporting to the
    /// Guardian whenever nothing moved for the stall timeout; the Guardian may hint, stop the
    /// run, or have a silent model call cut (`None`: the caller makes it again).
    pub(super) async fn watched<F: Future + Unpin>(
        &mut self,
        mut work: F,
        phase: StallPhase,
        tools: Vec<String>,
        on_interrupt: OnInterrupt,
    ) -> Step<Option<F::Output>> {
        let guardian_on = self.session.services.agent.guardian.enabled;
        let timeout = self.stall_timeout();
        let mut next_check = Some(Instant::now() + timeout).filter(|_| guardian_on);
        loop {
            let waited = self.wait_until(&mut work, next_check, on_interrupt).await?;
            if let Waited::Done(value) = waited {
                return Ok(Some(value));
            }
            let silent = self.run.call().heartbeat().silent_for();
            if silent < timeout {
                next_check = Some(Instant::now() + (timeout - silent));
                continue;
            }
            next_check = Some(Instant::now() + timeout);
            let guardian = self.session.services.guardian.clone();
            let (session_id, run_id) = (self.session.id.clone(), self.run.id().clone());
            let names = tools.clone();
            let report = async move {
                guardian
                    .stalled(session_id, run_id, phase, silent, names)
                    .await
            };
            let Some(review) = self.wait_as(report, on_interrupt).await? else {
                continue;
            };
            // The work may have finished while the Guardian was asked: the review of its
            // stall is moot then.
            if let Some(value) = (&mut work).now_or_never() {
                return Ok(Some(value));
            }
            // A model stream may have spoken while the Guardian was asked.
            if phase == StallPhase::Model && self.run.call().heartbeat().silent_for() < timeout {
                continue;
            }
            let retry = review.retry_model_call && phase == StallPhase::Model;
            if let Some((status, reason)) = self.apply_review(review) {
                return Err(self.stopped_by_guardian(status, reason));
            }
            if self.run.oversight().watch_to_store() {
                self.submit(None, None);
            }
            if retry {
                return Ok(None);
            }
            self.run.call().heartbeat().beat();
        }
    }

    pub(super) fn stall_timeout(&self) -> Duration {
        let secs = self.session.services.agent.guardian.stall_timeout_secs;
        Duration::from_secs(secs.max(1))
    }
}
