//! What stands between the console and a request: the session cookie or a bearer token, the
//! scope a change needs, the same-origin check on a browser's changes, and the headers every
//! answer carries.

use super::State;
use axum::extract::{FromRequestParts, Path};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use ryvos::access::Scope;
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

/// Who a request comes from, once admitted: a person's console session (its cookie) or a
/// program's bearer token.
pub(super) struct Caller {
    pub scope: Scope,
    /// Who answers, as the audit and `ApprovalResolved` say it.
    pub by: String,
    /// The session cookie, when it is a person's.
    pub cookie: Option<String>,
}

impl FromRequestParts<State> for Caller {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &State) -> Result<Self, Response> {
        caller(state, &parts.headers)
            .await?
            .ok_or_else(unauthorized)
    }
}

/// Who sent a request with `headers`, if anyone admitted: a bearer token when one is sent
/// (a wrong one admits nobody, whatever cookie comes with it), else the session cookie.
pub(super) async fn caller(state: &State, headers: &HeaderMap) -> Result<Option<Caller>, Response> {
    let access = state.shared.runtime.access();
    let unreadable = |e: ryvos::access::AccessError| {
        refused(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("who may enter cannot be read from the store now ({e}); try again"),
        )
    };
    if let Some(token) = bearer(headers) {
        let token = access.admit_token(token).await.map_err(unreadable)?;
        return Ok(token.map(|t| Caller {
            scope: t.scope,
            by: format!("token {}", t.name),
            cookie: None,
        }));
    }
    let Some(cookie) = cookie(headers) else {
        return Ok(None);
    };
    let open = access.session_is_open(&cookie).await.map_err(unreadable)?;
    Ok(open.then(|| Caller {
        scope: Scope::Operate,
        by: "the console".into(),
        cookie: Some(cookie),
    }))
}

/// A caller who may change things: a token of scope `operate`, or a console session whose
/// request came from the console's own page (see [`SameOrigin`]). A token is sent on purpose,
/// never by a browser on its own, so it needs no origin check.
pub(super) struct Operator(pub Caller);

impl FromRequestParts<State> for Operator {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &State) -> Result<Self, Response> {
        let caller = Caller::from_request_parts(parts, state).await?;
        if caller.cookie.is_some() {
            SameOrigin::from_request_parts(parts, state).await?;
        }
        if !caller.scope.operates() {
            return Err(refused(
                StatusCode::FORBIDDEN,
                &format!(
                    "{} may only read: make a token with --scope operate to approve, continue \
                     or stop",
                    caller.by
                ),
            ));
        }
        Ok(Operator(caller))
    }
}

/// The token of an `Authorization: Bearer …` header, if one is sent.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
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
    let max_age = ryvos::access::SESSION_LIFETIME.as_secs();
    let secure = if secure { "; Secure" } else { "" };
    let cookie =
        format!("{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}");
    HeaderValue::from_str(&cookie).expect("a cookie of hex digits is a header value")
}

/// A cookie that ends the session in the browser.
pub(super) fn cleared_cookie() -> HeaderValue {
    let cleared = format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    HeaderValue::from_str(&cleared).expect("the cookie's name is a header value")
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
