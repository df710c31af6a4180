//! A session as the console shows it: what its store holds, and its events live as they
//! happen, as server-sent events. The stream ends when the daemon stops; the browser
//! reconnects by itself, to this daemon or the next.

use super::api::answered;
use super::guard::{Caller, SessionInPath};
use super::State;
use axum::response::sse::{Event as Sent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use std::convert::Infallible;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::BroadcastStream;

/// Everything stored of a session, as `ryvos history --json` shows it.
pub(super) async fn history(
    axum::extract::State(state): axum::extract::State<State>,
    _: Caller,
    SessionInPath(id): SessionInPath,
) -> Response {
    answered(super::super::reads::history(&id, &state.shared).await)
}

/// The session's events from now on, each as the socket sends it (`data:` its JSON); an
/// event named `lagged`, with how many were missed, when the browser fell behind.
pub(super) async fn events(
    axum::extract::State(state): axum::extract::State<State>,
    _: Caller,
    SessionInPath(id): SessionInPath,
) -> Response {
    let live = BroadcastStream::new(state.shared.runtime.subscribe());
    let stopped = state.shared.shutdown.clone().cancelled_owned();
    let sent = live
        .filter_map(move |received| {
            let sent = match received {
                Ok(event) if event.session_id == id => Sent::default().json_data(&*event).ok(),
                Ok(_) => None,
                Err(BroadcastStreamRecvError::Lagged(missed)) => {
                    Some(Sent::default().event("lagged").data(missed.to_string()))
                }
            };
            std::future::ready(sent.map(Ok::<_, Infallible>))
        })
        .take_until(stopped);
    Sse::new(sent)
        .keep_alive(KeepAlive::default())
        .into_response()
}
