//! What a session asks its sibling actors, as one typed handle each: `ledger.record(..)`,
//! `guardian.review(..)`, `models.stream(..)`, `tools.execute(..)`, `judge.evaluate(..)`, each
//! awaited by the run's driver.
//!
//! Every question goes through the actor's slot, so it rides out a restart of that actor, and
//! is bounded. They fail differently: without the ledger no model call is made (spending must
//! never go unchecked); without the Guardian the run goes on unreviewed, and says so; work lost
//! with a model stream, tool executor or Judge that failed comes back as a loss the driver
//! handles (asked again, or answered as lost).

use crate::callback::Callback;
use crate::cost_ledger::{Authorization, BudgetNotice, CostLedgerMsg, Receipt, UsageReport};
use crate::event::{BudgetScope, EventKind, ParkReason, RunStatus, StallPhase};
use crate::guardian::{GuardianMsg, Review, TurnReport};
use crate::ids::{RunId, SessionId};
use crate::judge::{Evaluated, Evaluation, JudgeMsg};
use crate::llm_stream::{LlmMsg, ModelAnswer, StreamJob};
use crate::supervision::{ChildSlot, JobMsg};
use crate::tool_executor::{lost_outcomes, ToolBatch, ToolMsg, ToolOutcome};
use std::time::Duration;
use tokio::sync::oneshot;

/// How long a session waits for the ledger (through a restart of it) before it gives up.
/// Kept well under the shutdown's wait for runs to end.
const LEDGER_PATIENCE: Duration = Duration::from_secs(12);
/// How long a session waits for the Guardian before it goes on without a review.
const GUARDIAN_PATIENCE: Duration = Duration::from_secs(6);

/// Why a run may not make its next model call.
#[derive(Clone, Debug)]
pub(super) struct Refusal {
    pub status: RunStatus,
    /// The limit reached, published as `BudgetExceeded`; `None` when spending could not be
    /// checked at all.
    pub limit: Option<BudgetNotice>,
    pub reason: String,
    /// The run may park here, rather than end, until it is continued: at the ledger's
    /// per-run and monthly limits.
    pub parks: Option<ryvos_protocol::event::ParkReason>,
}

impl ChildSlot<CostLedgerMsg> {
    /// Whether the run may make another model call (at a run's start; later calls are judged
    /// by the receipt of the one before).
    pub(super) async fn authorize(
        &self,
        run_id: &RunId,
        run_limit_cents: Option<u64>,
    ) -> Result<(), Refusal> {
        let answer = self
            .call(
                |reply| CostLedgerMsg::Authorize {
                    run_id: run_id.clone(),
                    run_limit_cents,
                    reply,
                },
                LEDGER_PATIENCE,
            )
            .await;
        match answer {
            Ok(authorization) => admit(authorization),
            Err(e) => Err(unchecked(e.to_string())),
        }
    }

    /// Prices and records each call's usage, in order; a receipt per call.
    pub(super) async fn record(&self, reports: Vec<UsageReport>) -> Result<Vec<Receipt>, String> {
        let mut receipts = Vec::with_capacity(reports.len());
        for report in reports {
            let answer = self
                .call(
                    |reply| CostLedgerMsg::Record {
                        report: report.clone(),
                        reply,
                    },
                    LEDGER_PATIENCE,
                )
                .await;
            let why = match answer {
                Ok(Ok(receipt)) => {
                    receipts.push(receipt);
                    continue;
                }
                Ok(Err(e)) => e.to_string(),
                Err(e) => e.to_string(),
            };
            return Err(format!(
                "the cost ledger could not record the usage of model call {} ({why}); the run \
                 stopped so that spending cannot go unchecked",
                report.call
            ));
        }
        Ok(receipts)
    }

    /// The run is over: the ledger drops what it keeps of it.
    pub(super) fn run_ended(&self, session_id: &SessionId, run_id: &RunId) {
        let ended = CostLedgerMsg::RunEnded {
            session_id: session_id.clone(),
            run_id: run_id.clone(),
        };
        if self.cast(ended).is_err() {
            tracing::debug!("the cost ledger is down; a restarted one holds nothing of the run");
        }
    }
}

/// The ledger's answer as the loop uses it.
pub(super) fn admit(authorization: Authorization) -> Result<(), Refusal> {
    match authorization {
        Authorization::Allowed => Ok(()),
        Authorization::Refused(notice) => Err(Refusal {
            status: RunStatus::BudgetExceeded,
            reason: notice.message.clone(),
            parks: match notice.scope {
                BudgetScope::Run => Some(ParkReason::BudgetRun),
                BudgetScope::Month => Some(ParkReason::BudgetMonth),
                _ => None,
            },
            limit: Some(notice),
        }),
        Authorization::Unverifiable(e) => Err(unchecked(e.to_string())),
    }
}

fn unchecked(why: String) -> Refusal {
    Refusal {
        status: RunStatus::Failed,
        limit: None,
        parks: None,
        reason: format!(
            "spending could not be checked ({why}); no model call is made without a budget check"
        ),
    }
}

impl ChildSlot<GuardianMsg> {
    /// Reviews a finished turn. Without an answer the run goes on, and an `Error` event says
    /// the turn went unreviewed.
    pub(super) async fn review(&self, run_id: RunId, report: TurnReport, first: bool) -> Review {
        let answer = self
            .call(
                |reply| GuardianMsg::ReviewTurn {
                    run_id: run_id.clone(),
                    report: report.clone(),
                    first,
                    reply,
                },
                GUARDIAN_PATIENCE,
            )
            .await;
        answer.unwrap_or_else(|e| Review {
            events: vec![EventKind::Error {
                message: format!("this turn was not reviewed by the Guardian: {e}"),
            }],
            ..Review::default()
        })
    }

    /// Reports that the run made no progress for `silent_for`; `None` if the Guardian did not
    /// answer (the stall is reported again at the next check).
    pub(super) async fn stalled(
        &self,
        session_id: SessionId,
        run_id: RunId,
        phase: StallPhase,
        silent_for: Duration,
        tools: Vec<String>,
    ) -> Option<Review> {
        let answer = self
            .call(
                |reply| GuardianMsg::Stalled {
                    run_id: run_id.clone(),
                    phase,
                    silent_for,
                    tools: tools.clone(),
                    reply,
                },
                GUARDIAN_PATIENCE,
            )
            .await;
        match answer {
            Ok(review) => Some(review),
            Err(e) => {
                tracing::warn!(session = %session_id, "a stall went unreported: {e}");
                None
            }
        }
    }

    /// The run is over: the Guardian drops what it keeps of it.
    pub(super) fn run_ended(&self, run_id: &RunId) {
        let ended = GuardianMsg::RunEnded {
            run_id: run_id.clone(),
        };
        if self.cast(ended).is_err() {
            tracing::debug!("the Guardian is down; a restarted one holds nothing of the run");
        }
    }
}

impl ChildSlot<LlmMsg> {
    /// Streams the answer to `job` (built with [`StreamJob`]'s `on_done` left to this); a job
    /// lost with an actor that failed before asking comes back `lost`, naming `what` it was.
    pub(super) fn stream(
        &self,
        what: &'static str,
        job: impl FnOnce(Callback<ModelAnswer>) -> StreamJob,
    ) -> Answer<ModelAnswer> {
        let (on_done, answer) = answered(move || ModelAnswer::lost(what));
        // A model actor being restarted gets the job once it is back.
        self.send(JobMsg::Do(Box::new(job(on_done))));
        answer
    }
}

impl ChildSlot<ToolMsg> {
    /// Runs a batch of calls; a batch lost with the executor answers each call as lost.
    pub(super) fn execute(
        &self,
        batch: impl FnOnce(Callback<Vec<ToolOutcome>>) -> ToolBatch,
        calls: &[crate::message::ToolCall],
    ) -> Answer<Vec<ToolOutcome>> {
        let lost = calls.to_vec();
        let (on_done, outcomes) = answered(move || lost_outcomes(&lost));
        self.send(JobMsg::Do(Box::new(batch(on_done))));
        outcomes
    }
}

impl ChildSlot<JudgeMsg> {
    /// Evaluates an answer against the run's goal; an evaluation lost with the Judge gives no
    /// verdict (so no acceptance).
    pub(super) fn evaluate(
        &self,
        job: impl FnOnce(Callback<Evaluated>) -> Evaluation,
    ) -> Answer<Evaluated> {
        let lost = || Evaluated::failed("the Judge was lost (its actor or task failed)");
        let (on_done, evaluated) = answered(lost);
        self.send(JobMsg::Do(Box::new(job(on_done))));
        evaluated
    }
}

/// The callback to hand a sibling with its work, and the answer it gives; `lost` makes the
/// answer when the work is lost (dropped unanswered, with the actor that held it).
fn answered<T: Send + 'static>(
    lost: impl FnOnce() -> T + Send + 'static,
) -> (Callback<T>, Answer<T>) {
    let (tx, rx) = oneshot::channel();
    let on_done = Callback::new(
        move |value| {
            if tx.send(value).is_err() {
                // The run ended (stopped, timed out) while its work was out.
                tracing::debug!("an answer came for a run that no longer waits for it");
            }
        },
        lost,
    );
    (on_done, Answer(rx))
}

/// An answer on its way from a sibling actor: always comes, since the work's callback answers
/// even when the work is lost.
pub(super) struct Answer<T>(oneshot::Receiver<T>);

impl<T> std::future::Future for Answer<T> {
    type Output = Option<T>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<T>> {
        std::pin::Pin::new(&mut self.0).poll(cx).map(Result::ok)
    }
}
