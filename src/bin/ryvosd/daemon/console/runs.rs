//! Parked runs from the console: continued with a new budget, or stopped where they parked,
//! through the same façade as `ryvos continue` and `ryvos stop`. A continued run goes on in
//! the daemon; the page follows it through its session's events.

use super::guard::{self, Authed, SameOrigin};
use super::State;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use ryvos::{RunId, RuntimeError};
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
    _: SameOrigin,
    _: Authed,
    Path(run): Path<String>,
    body: Option<Json<Continue>>,
) -> Response {
    let Some(run) = run_id(run) else {
        return not_a_run();
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
        Err(e) => failed(e),
    }
}

/// Stops a run (a parked one where it parked, one in flight cancelled); its outcome.
pub(super) async fn stop_run(
    axum::extract::State(state): axum::extract::State<State>,
    _: SameOrigin,
    _: Authed,
    Path(run): Path<String>,
) -> Response {
    let Some(run) = run_id(run) else {
        return not_a_run();
    };
    let stopped = match state.shared.runtime.stop_run(&run).await {
        Ok(handle) => handle.outcome().await,
        Err(e) => Err(e),
    };
    match stopped {
        Ok(outcome) => Json(outcome).into_response(),
        Err(e) => failed(e),
    }
}

/// The run `given` names, when it is one.
fn run_id(given: String) -> Option<RunId> {
    RunId::is_well_formed(&given).then(|| RunId::new(given))
}

fn not_a_run() -> Response {
    guard::refused(StatusCode::BAD_REQUEST, "that is not a run id (r_…)")
}

fn failed(e: RuntimeError) -> Response {
    let status = match &e {
        RuntimeError::NoSuchRun(_) => StatusCode::NOT_FOUND,
        RuntimeError::NotParked(_) | RuntimeError::BadRequest(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    guard::refused(status, &e.to_string())
}
