//! A session taken back to a turn, or forked there, from the console: through the same
//! façade, and with the same checks and errors, as the socket's `rewind` and `fork`. Only an
//! operator may: a rewind changes the workspace's files.

use super::super::between_runs;
use super::api::failed;
use super::guard::{Operator, SessionInPath};
use super::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use ryvos::protocol::{ForkParams, RewindParams};
use serde::Deserialize;

/// `POST /api/sessions/{id}/rewind`'s body: one of `turn`, `run`, `undo`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct Rewind {
    turn: Option<u32>,
    run: Option<String>,
    #[serde(default)]
    undo: bool,
}

/// Rewinds the session; what it changed, as the socket answers it.
pub(super) async fn rewind(
    axum::extract::State(state): axum::extract::State<State>,
    _: Operator,
    SessionInPath(id): SessionInPath,
    Json(body): Json<Rewind>,
) -> Response {
    let params = RewindParams {
        session: id.to_string(),
        turn: body.turn,
        run: body.run,
        undo: body.undo,
    };
    match between_runs::rewind(params, &state.shared).await {
        Ok(rewound) => {
            tracing::info!(session = %id, to = %rewound.to, "rewound from the console");
            Json(rewound).into_response()
        }
        Err(error) => failed(error),
    }
}

/// `POST /api/sessions/{id}/fork`'s body: `turn` or `run`, and where the copy goes.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct Fork {
    turn: Option<u32>,
    run: Option<String>,
    workspace: Option<String>,
}

/// Forks the session; the new one, as the socket answers it.
pub(super) async fn fork(
    axum::extract::State(state): axum::extract::State<State>,
    _: Operator,
    SessionInPath(id): SessionInPath,
    Json(body): Json<Fork>,
) -> Response {
    let params = ForkParams {
        session: id.to_string(),
        turn: body.turn,
        run: body.run,
        workspace: body.workspace,
    };
    match between_runs::fork(params, &state.shared).await {
        Ok(forked) => {
            tracing::info!(session = %id, fork = %forked.session_id, "forked from the console");
            Json(forked).into_response()
        }
        Err(error) => failed(error),
    }
}
