//! What stands between the console and a request: the session cookie, the same-origin check
//! on every change, and the headers every answer carries.

use super::State;
use axum::extract::{FromRequestParts, Path};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use ryvos::SessionId;

/// The session cookie's name.
pub(super) const COOKIE: &str = "ryvos_console";

/// Nothing but the console's own scripts and styles, never framed, never sniffed, never
/// cached, no referrer sent on.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Adds the headers every answer carries.
pub(super) async fn headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// A request of a logged-in console session: its cookie's value.
pub(super) struct Authed(pub String);

impl FromRequestParts<State> for Authed {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &State) -> Result<Self, Response> {
        admitted(state, &parts.headers)
            .map(Authed)
            .ok_or_else(unauthorized)
    }
}

/// The cookie of a live console session among `headers`, if there is one.
pub(super) fn admitted(state: &State, headers: &HeaderMap) -> Option<String> {
    cookie(headers).filter(|value| state.access.admits(value))
}

/// A well-formed session id in the request's path.
pub(super) struct SessionInPath(pub SessionId);

impl FromRequestParts<State> for SessionInPath {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &State) -> Result<Self, Response> {
        let Path(id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        match SessionId::is_well_formed(&id) {
            true => Ok(SessionInPath(SessionId::new(id))),
            false => Err(refused(
                StatusCode::BAD_REQUEST,
                "that is not a session id (s_…)",
            )),
        }
    }
}

/// A request that changes something, sent by the console's own page: its `Origin` names the
/// host the request was sent to (a page elsewhere cannot act with the person's session). The
/// scheme is not compared: behind a proxy that terminates TLS, the page is `https` while the
/// daemon serves `http`.
pub(super) struct SameOrigin;

impl FromRequestParts<State> for SameOrigin {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &State) -> Result<Self, Response> {
        let header = |name| parts.headers.get(name).and_then(|h| h.to_str().ok());
        let host = header(header::HOST);
        let authority = header(header::ORIGIN)
            .and_then(|o| o.split_once("://"))
            .map(|(_, authority)| authority);
        match (host, authority) {
            (Some(host), Some(authority)) if authority == host => Ok(SameOrigin),
            _ => Err(refused(
                StatusCode::FORBIDDEN,
                "a change must come from the console's own page (its Origin did not match)",
            )),
        }
    }
}

/// The session cookie's value in `headers`, if any.
fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|h| h.to_str().ok())
        .flat_map(|h| h.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// The cookie that holds a console session, `Secure` over TLS.
pub(super) fn session_cookie(value: &str, secure: bool) -> HeaderValue {
    let max_age = super::access::SESSION_IDLE.as_secs();
    let secure = if secure { "; Secure" } else { "" };
    let cookie =
        format!("{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}");
    HeaderValue::from_str(&cookie).expect("a cookie of hex digits is a header value")
}

/// A cookie that ends the session in the browser.
pub(super) fn cleared_cookie() -> HeaderValue {
    HeaderValue::from_static("ryvos_console=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// 401, saying how to log in.
pub(super) fn unauthorized() -> Response {
    refused(
        StatusCode::UNAUTHORIZED,
        "log in first: `ryvos console` prints a one-time login link",
    )
}

/// `status` with `{"error": message}`.
pub(super) fn refused(status: StatusCode, message: &str) -> Response {
    let body = axum::Json(serde_json::json!({ "error": message }));
    (status, body).into_response()
}
