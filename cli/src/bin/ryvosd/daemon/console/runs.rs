//! Parked runs from the console: continued with a new budget, or stopped where they parked,
//! through the same façade, and the same checks and errors, as the socket's `continue` and
//! `stop`. A continued run goes on in the daemon; the page follows it through its session's
//! events.

use super::super::streaming::{parked_error, run_id};
use super::api::failed;
use super::guard::Operator;
use super::State;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

/// `POST /api/runs/{run}/continue`'s body.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct Continue {
    /// The run's total budget from now on, in cents (`ryvos continue --budget-cents`).
    budget_cents: Option<u64>,
}

/// Continues a parked run; answers once it is going on (202), with its run and session.
pub(super) async fn continue_run(
    axum::extract::State(state): axum::extract::State<State>,
    _: Operator,
    Path(run): Path<String>,
    body: Option<Json<Continue>>,
) -> Response {
    let run = match run_id(&run) {
        Ok(run) => run,
        Err(error) => return failed(error),
    };
    let budget = body.and_then(|Json(c)| c.budget_cents);
    match state.shared.runtime.continue_run(&run, budget).await {
        Ok(handle) => {
            let going = serde_json::json!({
                "run_id": handle.run_id, "session_id": handle.session_id,
            });
            tracing::info!(run = %handle.run_id, "continued from the console");
            (StatusCode::ACCEPTED, Json(going)).into_response()
        }
        Err(e) => failed(parked_error(e)),
    }
}

/// Stops a run (a parked one where it parked, one in flight cancelled); its outcome.
pub(super) async fn stop_run(
    axum::extract::State(state): axum::extract::State<State>,
    _: Operator,
    Path(run): Path<String>,
) -> Response {
    let run = match run_id(&run) {
        Ok(run) => run,
        Err(error) => return failed(error),
    };
    let stopped = match state.shared.runtime.stop_run(&run).await {
        Ok(handle) => handle.outcome().await,
        Err(e) => Err(e),
    };
    match stopped {
        Ok(outcome) => Json(outcome).into_response(),
        Err(e) => failed(parked_error(e)),
    }
}
