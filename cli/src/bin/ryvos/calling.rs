//! Calls to the daemon, each on a connection of its own.

use ryvos::protocol::{AnswerParams, Approve, Call, Deny};
use ryvos::Answer;
use ryvos_client::Client;
use std::path::Path;

/// A connection to the daemon at `socket`.
pub async fn connect(socket: &Path) -> Result<Client, String> {
    Client::connect(socket)
        .await
        .map_err(|e| format!("{e}; is ryvosd still running?"))
}

/// One call to the daemon.
pub async fn called<C: Call>(socket: &Path, params: &C::Params) -> Result<C::Result, String> {
    match connect(socket).await?.call::<C>(params).await {
        Ok(Ok(result)) => Ok(result),
        Ok(Err(error)) => Err(error.message),
        Err(e) => Err(e.to_string()),
    }
}

/// Answers approval request `request_id` as `answer` says, on behalf of `by`, through the
/// daemon at `socket` (which relays it to the daemon whose run waits).
pub async fn answer(
    socket: &Path,
    request_id: &str,
    answer: Answer,
    by: &str,
) -> Result<(), String> {
    let params = AnswerParams {
        request_id: request_id.to_owned(),
        reason: answer.reason,
        always: answer.always,
        by: Some(by.to_owned()),
    };
    match answer.approved {
        true => called::<Approve>(socket, &params).await.map(drop),
        false => called::<Deny>(socket, &params).await.map(drop),
    }
}
