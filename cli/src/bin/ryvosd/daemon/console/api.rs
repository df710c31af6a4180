//! The console's JSON API: what the page reads and the few things it may do, each through the
//! same façade and daemon functions the socket's methods use.

use super::guard::{self, Caller, Operator, SameOrigin};
use super::logins::Refused;
use super::State;
use axum::extract::{Path, Query};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use ryvos::protocol::records::SessionRecord;
use ryvos::protocol::{AnswerParams, ErrorBody, ErrorCode};
use ryvos::RunStatus;
use serde::Deserialize;

/// `POST /api/login`'s body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Login {
    code: String,
}

/// Trades a one-time code for a session cookie.
pub(super) async fn log_in(
    axum::extract::State(state): axum::extract::State<State>,
    _: SameOrigin,
    Json(login): Json<Login>,
) -> Response {
    match state.logins.redeem(login.code.trim()) {
        Ok(()) => match state.shared.runtime.access().open_session().await {
            Ok(cookie) => {
                let cookie = guard::session_cookie(&cookie, state.secure);
                (StatusCode::NO_CONTENT, [(header::SET_COOKIE, cookie)]).into_response()
            }
            Err(e) => guard::refused(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("the session could not be stored ({e}): `ryvos console` again"),
            ),
        },
        Err(Refused::Code) => guard::refused(
            StatusCode::UNAUTHORIZED,
            "that login code is not one (wrong, used, or expired): `ryvos console` prints a \
             new one",
        ),
        Err(Refused::TooMany(wait)) => guard::refused(
            StatusCode::TOO_MANY_REQUESTS,
            &format!(
                "too many failed logins: try again in {}s",
                wait.as_secs().max(1)
            ),
        ),
    }
}

/// Ends the session.
pub(super) async fn log_out(
    axum::extract::State(state): axum::extract::State<State>,
    _: SameOrigin,
    caller: Caller,
) -> Response {
    if let Some(cookie) = &caller.cookie {
        if let Err(e) = state.shared.runtime.access().close_session(cookie).await {
            return guard::refused(StatusCode::SERVICE_UNAVAILABLE, &e.to_string());
        }
    }
    let cleared = guard::cleared_cookie();
    (StatusCode::NO_CONTENT, [(header::SET_COOKIE, cleared)]).into_response()
}

/// The daemon's status, as `ryvos status` shows it.
pub(super) async fn status(
    axum::extract::State(state): axum::extract::State<State>,
    _: Caller,
) -> Response {
    Json(super::super::status::status(&state.shared).await).into_response()
}

/// `GET /api/sessions`'s query.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SessionsQuery {
    /// Only the sessions whose latest run ended so (`completed`, `parked`, …), or `running`
    /// for those with a run in flight.
    status: Option<String>,
    /// At most this many (default 100).
    limit: Option<usize>,
}

/// The sessions, most recently updated first.
pub(super) async fn sessions(
    axum::extract::State(state): axum::extract::State<State>,
    _: Caller,
    Query(query): Query<SessionsQuery>,
) -> Response {
    let sessions = match super::super::reads::sessions(&state.shared).await {
        Ok(sessions) => sessions,
        Err(error) => return failed(error),
    };
    // Read once, not per session: a status no run ends with matches none.
    let ended_so = query
        .status
        .as_deref()
        .map(|status| serde_json::from_value::<RunStatus>(serde_json::Value::from(status)).ok());
    let wanted = |s: &SessionRecord| match (query.status.as_deref(), ended_so) {
        (None | Some(""), _) => true,
        (Some("running"), _) => s.last_run.is_some() && s.last_status.is_none(),
        (_, ended_so) => ended_so.flatten().is_some_and(|e| s.last_status == Some(e)),
    };
    let limit = query.limit.unwrap_or(100).clamp(1, 1_000);
    let listed: Vec<&SessionRecord> = sessions.iter().filter(|s| wanted(s)).take(limit).collect();
    Json(listed).into_response()
}

/// The month's spending against the limits, per day and per model (`ryvos cost`'s report).
pub(super) async fn costs(
    axum::extract::State(state): axum::extract::State<State>,
    _: Caller,
) -> Response {
    answered(super::super::reads::cost(&state.shared).await)
}

/// The calls waiting for a person's answer.
pub(super) async fn approvals(
    axum::extract::State(state): axum::extract::State<State>,
    _: Caller,
) -> Response {
    Json(super::super::approvals::pending(&state.shared).await).into_response()
}

/// `POST /api/approvals/{id}/{approve|deny}`'s body.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct Answer {
    reason: Option<String>,
}

/// Approves or denies a waiting call, as `ryvos approve` and `ryvos deny` do (through the
/// daemon waiting for it, in a cluster).
pub(super) async fn answer(
    axum::extract::State(state): axum::extract::State<State>,
    Operator(caller): Operator,
    Path((request_id, answer)): Path<(String, String)>,
    body: Option<Json<Answer>>,
) -> Response {
    let approved = match answer.as_str() {
        "approve" => true,
        "deny" => false,
        _ => return not_found().await,
    };
    let reason = body
        .and_then(|Json(a)| a.reason)
        .filter(|r| !r.trim().is_empty());
    let params = AnswerParams {
        request_id,
        reason,
        always: false,
        by: Some(caller.by),
    };
    answered(super::super::approvals::answer(params, approved, &state.shared).await)
}

/// Anything else.
pub(super) async fn not_found() -> Response {
    guard::refused(StatusCode::NOT_FOUND, "there is nothing here")
}

/// A daemon function's answer as an HTTP one: its result as JSON, or its error.
pub(super) fn answered<T: serde::Serialize>(answer: Result<T, ErrorBody>) -> Response {
    match answer {
        Ok(result) => Json(result).into_response(),
        Err(error) => failed(error),
    }
}

/// A daemon error as an HTTP answer.
pub(super) fn failed(error: ErrorBody) -> Response {
    let status = match error.code {
        ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::BadRequest | ErrorCode::BadFrame => StatusCode::BAD_REQUEST,
        ErrorCode::Busy => StatusCode::CONFLICT,
        ErrorCode::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    guard::refused(status, &error.message)
}
