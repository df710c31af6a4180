//! The console's page, served from the binary: nothing is fetched from elsewhere, and nothing
//! needs building to install it. Without a session only the login page and its script are
//! served, with 401.

use super::guard::{admitted, Authed};
use super::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};

const CONSOLE_HTML: &str = include_str!("assets/console.html");
const LOGIN_HTML: &str = include_str!("assets/login.html");
const CONSOLE_JS: &str = include_str!("assets/console.js");
const LOGIN_JS: &str = include_str!("assets/login.js");
const CONSOLE_CSS: &str = include_str!("assets/console.css");

/// The console for a session; the login page, with 401, for anyone else.
pub(super) async fn page(
    axum::extract::State(state): axum::extract::State<State>,
    headers: HeaderMap,
) -> Response {
    match admitted(&state, &headers) {
        Some(_) => Html(CONSOLE_HTML).into_response(),
        None => (StatusCode::UNAUTHORIZED, Html(LOGIN_HTML)).into_response(),
    }
}

/// The login page's script: it trades the code in the address's fragment for a session.
pub(super) async fn login_js() -> Response {
    asset(LOGIN_JS, "text/javascript; charset=utf-8")
}

pub(super) async fn console_js(_: Authed) -> Response {
    asset(CONSOLE_JS, "text/javascript; charset=utf-8")
}

pub(super) async fn console_css(_: Authed) -> Response {
    asset(CONSOLE_CSS, "text/css; charset=utf-8")
}

fn asset(body: &'static str, kind: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}
