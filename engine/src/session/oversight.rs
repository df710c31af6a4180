//! What a session asks the cost ledger and the Guardian, and how long it waits for them.
//!
//! Both are asked through their slots, so a call rides out a restart of either actor. The two
//! fail differently: without the ledger no model call is made (spending must never go
//! unchecked); without the Guardian the run goes on unreviewed, and says so.

use super::Services;
use crate::cost_ledger::{Authorization, BudgetNotice, CostLedgerMsg, Receipt, UsageReport};
use crate::event::{EventKind, RunStatus, StallPhase};
use crate::guardian::{GuardianMsg, Review, TurnReport};
use crate::ids::{RunId, SessionId};
use crate::supervision::ChildSlot;
use std::time::Duration;

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
}

/// Asks the ledger whether the run may make another model call (at a run's start; later calls
/// are judged by the receipt of the one before).
pub(super) async fn authorize(services: &Services, run_id: &RunId) -> Result<(), Refusal> {
    let answer = services
        .ledger
        .call(
            |reply| CostLedgerMsg::Authorize {
                run_id: run_id.clone(),
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

/// The ledger's answer as the loop uses it.
pub(super) fn admit(authorization: Authorization) -> Result<(), Refusal> {
    match authorization {
        Authorization::Allowed => Ok(()),
        Authorization::Refused(notice) => Err(Refusal {
            status: RunStatus::BudgetExceeded,
            reason: notice.message.clone(),
            limit: Some(notice),
        }),
        Authorization::Unverifiable(e) => Err(unchecked(e.to_string())),
    }
}

fn unchecked(why: String) -> Refusal {
    Refusal {
        status: RunStatus::Failed,
        limit: None,
        reason: format!(
            "spending could not be checked ({why}); no model call is made without a budget check"
        ),
    }
}

/// Has the ledger price and record each call's usage, in order; a receipt per call.
pub(super) async fn record_usage(
    ledger: ChildSlot<CostLedgerMsg>,
    reports: Vec<UsageReport>,
) -> Result<Vec<Receipt>, String> {
    let mut receipts = Vec::with_capacity(reports.len());
    for report in reports {
        let answer = ledger
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

/// Has the Guardian review a finished turn. Without an answer the run goes on, and an `Error`
/// event says the turn went unreviewed.
pub(super) async fn review_turn(
    guardian: ChildSlot<GuardianMsg>,
    run_id: RunId,
    report: TurnReport,
    first: bool,
) -> Review {
    let answer = guardian
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

/// Tells the Guardian the run made no progress for `silent_for`; `None` if it did not answer
/// (the stall is reported again at the next check).
pub(super) async fn report_stall(
    guardian: ChildSlot<GuardianMsg>,
    session_id: SessionId,
    run_id: RunId,
    phase: StallPhase,
    silent_for: Duration,
    tools: Vec<String>,
) -> Option<Review> {
    let answer = guardian
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
