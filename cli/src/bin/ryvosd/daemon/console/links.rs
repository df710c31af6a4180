//! Approval links: what a notification carries so that a person can answer from wherever it
//! reaches them, without logging in. Each link is signed (see `ryvos::access::links`), bound
//! to its request and its action, expires, and works once. Its page shows the request and
//! acts only on a click: a GET never answers anything, so a link preview approves nothing.

use super::super::approvals;
use super::api::answered;
use super::guard::refused;
use super::{Shared, State};
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use ryvos::access::links::{LinkAction, LinkGrant};
use ryvos::protocol::AnswerParams;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The shortest a link lasts; longer when calls wait longer for approval.
const MIN_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// An approval request's links.
#[derive(Serialize)]
pub(crate) struct Links {
    /// Approves it, after one click on its page.
    pub approve: String,
    /// Denies it, after one click (and an optional reason).
    pub deny: String,
    /// The console, where the request is listed (a login is needed there).
    pub open: String,
}

/// The links for request `request_id`; `None` when no console is served to open them.
pub(crate) async fn for_request(
    shared: &Shared,
    request_id: &str,
) -> Result<Option<Links>, ryvos::access::AccessError> {
    let Some(console) = &shared.console else {
        return Ok(None);
    };
    let waits = Duration::from_secs(shared.config.security.approval_timeout_secs);
    let lifetime = waits.max(MIN_LIFETIME);
    let access = shared.runtime.access();
    let page = format!("{}/approval/{request_id}#link=", console.origin);
    Ok(Some(Links {
        approve: page.clone()
            + &access
                .sign_link(request_id, LinkAction::Approve, lifetime)
                .await?,
        deny: page
            + &access
                .sign_link(request_id, LinkAction::Deny, lifetime)
                .await?,
        open: format!("{}/#approvals", console.origin),
    }))
}

/// The body of `POST /api/links/{request}/look` and `…/use`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Presented {
    link: String,
    #[serde(default)]
    reason: Option<String>,
}

/// What a good link is for: the request it answers, and how.
pub(super) async fn look(
    axum::extract::State(state): axum::extract::State<State>,
    Path(request_id): Path<String>,
    Json(presented): Json<Presented>,
) -> Response {
    let access = state.shared.runtime.access();
    let grant = match access.check_link(&request_id, &presented.link).await {
        Ok(Ok(grant)) => grant,
        Ok(Err(why)) => return refused(StatusCode::FORBIDDEN, &why.to_string()),
        Err(e) => return refused(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    };
    let waiting = approvals::pending(&state.shared).await;
    match waiting.into_iter().find(|a| a.request_id == request_id) {
        Some(request) => {
            let action = grant.action.as_str();
            Json(serde_json::json!({ "action": action, "request": request })).into_response()
        }
        None => refused(
            StatusCode::GONE,
            "this request no longer waits: it was answered, or its run ended",
        ),
    }
}

/// Uses the link up and answers its request as it says.
pub(super) async fn use_link(
    axum::extract::State(state): axum::extract::State<State>,
    Path(request_id): Path<String>,
    Json(presented): Json<Presented>,
) -> Response {
    let access = state.shared.runtime.access();
    let LinkGrant { action, .. } = match access.spend_link(&request_id, &presented.link).await {
        Ok(Ok(grant)) => grant,
        Ok(Err(why)) => return refused(StatusCode::FORBIDDEN, &why.to_string()),
        Err(e) => return refused(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    };
    let params = AnswerParams {
        request_id,
        reason: presented.reason.filter(|r| !r.trim().is_empty()),
        always: false,
        by: Some("an approval link".into()),
    };
    let approved = action == LinkAction::Approve;
    answered(approvals::answer(params, approved, &state.shared).await)
}
