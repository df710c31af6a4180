//! The console: `ryvosd`'s HTTP door, off unless `[http] listen` is set. A browser logs in
//! with a one-time code (`ryvos console`) and watches and steers the daemon through the same
//! `Runtime` façade the socket serves: no second implementation of runs or approvals.

mod a2a;
mod api;
mod assets;
mod guard;
pub(crate) mod links;
mod live;
pub(crate) mod logins;
mod rewinds;
mod runs;
mod tls;

use super::{DaemonError, Shared};
pub(crate) use a2a::Pushes;
use axum::routing::{get, post};
use axum::Router;
use logins::Logins;
use ryvos::config::HttpDoor;
use ryvos::protocol::{ConsoleResult, ErrorBody, ErrorCode};
use std::sync::Arc;

/// The longest request body the console reads (an answer's reason, a login code).
const MAX_BODY_BYTES: usize = 16 * 1024;

/// The console's door as the rest of the daemon sees it: where it is, and who may enter.
pub(crate) struct Console {
    /// `http://127.0.0.1:7420`, `https://…`: what a browser is sent to.
    pub origin: String,
    pub logins: Arc<Logins>,
}

/// The console's listener, bound (so that a daemon whose door cannot open does not start) but
/// not yet serving.
pub(crate) struct Opened {
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    /// The same as its [`Console`]'s.
    logins: Arc<Logins>,
}

/// Binds the door `[http]` asks for; `None` when it is off.
pub(crate) async fn open(door: Option<HttpDoor>) -> Result<Option<(Opened, Console)>, DaemonError> {
    let Some(door) = door else {
        return Ok(None);
    };
    let tls = match &door.tls {
        Some((cert, key)) => Some(tls::acceptor(cert, key).map_err(DaemonError::Setup)?),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(door.address)
        .await
        .map_err(|e| DaemonError::Setup(format!("[http] listen on {}: {e}", door.address)))?;
    let address = listener
        .local_addr()
        .map_err(|e| DaemonError::Setup(format!("[http] listen: {e}")))?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let logins = Arc::new(Logins::default());
    let console = Console {
        origin: format!("{scheme}://{address}"),
        logins: logins.clone(),
    };
    Ok(Some((
        Opened {
            listener,
            tls,
            logins,
        },
        console,
    )))
}

/// A one-time login to the console, when it is served (the socket's `console`).
pub(super) fn login(shared: &Shared) -> Result<ConsoleResult, ErrorBody> {
    let Some(console) = &shared.console else {
        return Err(ErrorBody::new(
            ErrorCode::BadRequest,
            "this daemon serves no console: set [http] listen = \"127.0.0.1:7420\" in its \
             config and restart it",
        ));
    };
    let code = console.logins.new_code();
    Ok(ConsoleResult {
        url: format!("{}/#code={code}", console.origin),
        expires_in_secs: logins::CODE_LIFETIME.as_secs(),
    })
}

/// Serves the console until the daemon stops.
pub(crate) fn spawn(opened: Opened, shared: Arc<Shared>) -> tokio::task::JoinHandle<()> {
    let secure = opened.tls.is_some();
    let app = router(shared.clone(), opened.logins, secure);
    let stop = shared.shutdown.clone().cancelled_owned();
    tokio::spawn(async move {
        let served = match opened.tls {
            Some(acceptor) => {
                let listener = match tls::Listener::new(opened.listener, acceptor) {
                    Ok(listener) => listener,
                    Err(e) => return tracing::error!("the console could not listen: {e}"),
                };
                axum::serve(listener, app)
                    .with_graceful_shutdown(stop)
                    .await
            }
            None => {
                axum::serve(opened.listener, app)
                    .with_graceful_shutdown(stop)
                    .await
            }
        };
        if let Err(e) = served {
            tracing::error!("the console stopped: {e}");
        }
    })
}

/// What every handler of the console has.
#[derive(Clone)]
pub(super) struct State {
    pub shared: Arc<Shared>,
    /// The login codes: the daemon's [`Console::logins`].
    pub logins: Arc<Logins>,
    /// Served over TLS: the cookie is `Secure`.
    pub secure: bool,
    /// The A2A tasks begun here and not yet stored.
    pub begun: Arc<a2a::Begun>,
}

fn router(shared: Arc<Shared>, logins: Arc<Logins>, secure: bool) -> Router {
    Router::new()
        .route("/", get(assets::page))
        .route("/login.js", get(assets::login_js))
        .route("/console.js", get(assets::console_js))
        .route("/costs.js", get(assets::costs_js))
        .route("/console.css", get(assets::console_css))
        .route("/link.js", get(assets::link_js))
        .route("/approval/{request}", get(assets::link_page))
        .route("/api/links/{request}/look", post(links::look))
        .route("/api/links/{request}/use", post(links::use_link))
        .route("/api/login", post(api::log_in))
        .route("/api/logout", post(api::log_out))
        .route("/api/status", get(api::status))
        .route("/api/sessions", get(api::sessions))
        .route("/api/sessions/{id}", get(live::history))
        .route("/api/sessions/{id}/events", get(live::events))
        .route("/api/sessions/{id}/rewind", post(rewinds::rewind))
        .route("/api/sessions/{id}/fork", post(rewinds::fork))
        .route("/api/runs/{run}/continue", post(runs::continue_run))
        .route("/api/runs/{run}/stop", post(runs::stop_run))
        .route("/api/approvals", get(api::approvals))
        .route("/api/costs", get(api::costs))
        .route("/api/approvals/{id}/{answer}", post(api::answer))
        .route("/.well-known/agent-card.json", get(a2a::card))
        .route("/a2a", post(a2a::rpc))
        .fallback(api::not_found)
        .layer(axum::middleware::map_response(guard::headers))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(State {
            shared,
            logins,
            secure,
            begun: Arc::default(),
        })
}
