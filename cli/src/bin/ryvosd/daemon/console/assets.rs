//! The console's page, served from the binary: nothing is fetched from elsewhere, and nothing
//! needs building to install it. Without a session only the login page, an approval link's
//! page, their scripts and the styles are served (the login page with 401).

use super::guard::{caller, Caller};
use super::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};

const CONSOLE_HTML: &str = include_str!("assets/console.html");
const LOGIN_HTML: &str = include_str!("assets/login.html");
const CONSOLE_JS: &str = include_str!("assets/console.js");
const LOGIN_JS: &str = include_str!("assets/login.js");
const COSTS_JS: &str = include_str!("assets/costs.js");
const CONSOLE_CSS: &str = include_str!("assets/console.css");
const LINK_HTML: &str = include_str!("assets/link.html");
const LINK_JS: &str = include_str!("assets/link.js");

/// The console for a session; the login page, with 401, for anyone else.
pub(super) async fn page(
    axum::extract::State(state): axum::extract::State<State>,
    headers: HeaderMap,
) -> Response {
    match caller(&state, &headers).await {
        Ok(Some(_)) => Html(CONSOLE_HTML).into_response(),
        Ok(None) => (StatusCode::UNAUTHORIZED, Html(LOGIN_HTML)).into_response(),
        Err(refused) => refused,
    }
}

/// The login page's script: it trades the code in the address's fragment for a session.
pub(super) async fn login_js() -> Response {
    asset(LOGIN_JS, "text/javascript; charset=utf-8")
}

pub(super) async fn console_js(_: Caller) -> Response {
    asset(CONSOLE_JS, "text/javascript; charset=utf-8")
}

pub(super) async fn costs_js(_: Caller) -> Response {
    asset(COSTS_JS, "text/javascript; charset=utf-8")
}

/// The styles: served to anyone, as the approval link's page uses them too (they say nothing
/// of any run).
pub(super) async fn console_css() -> Response {
    asset(CONSOLE_CSS, "text/css; charset=utf-8")
}

/// An approval link's page: the same for every link (the link itself stays in the address's
/// fragment, which is never sent here), acting on nothing until its button is clicked.
pub(super) async fn link_page() -> Response {
    Html(LINK_HTML).into_response()
}

pub(super) async fn link_js() -> Response {
    asset(LINK_JS, "text/javascript; charset=utf-8")
}

fn asset(body: &'static str, kind: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}
