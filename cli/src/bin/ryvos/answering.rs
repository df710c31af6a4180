//! `ryvos approve` and `ryvos deny`: through the daemon when one answers; with none, a request
//! kept in the store (its run paused, or the daemon stopped) is answered there, and the
//! session's next run takes the answer.

use crate::exit::{EXIT_DAEMON, EXIT_RUN_FAILED};
use crate::out::outln;
use crate::reading::{call, on_the_store, store_only};
use ryvos::config::Config;
use ryvos::protocol::{AnswerParams, Approve, Deny};
use ryvos::Runtime;
use ryvos_client::{Client, ClientError};

/// Approves (`approved`) or denies the request `params` names; the exit code.
pub async fn answer(
    params: AnswerParams,
    approved: bool,
    socket: &std::path::Path,
    config: &Config,
) -> u8 {
    let said = if approved { "approved" } else { "denied" };
    match Client::connect(socket).await {
        Ok(mut client) if approved => {
            call::<Approve>(&mut client, &params, |_| outln!("{said}")).await
        }
        Ok(mut client) => call::<Deny>(&mut client, &params, |_| outln!("{said}")).await,
        Err(ClientError::NoDaemon { .. }) => in_the_store(params, approved, config).await,
        Err(e) => {
            eprintln!("ryvos: {e}");
            EXIT_DAEMON
        }
    }
}

/// Answers a request kept in the store, with no daemon running.
async fn in_the_store(params: AnswerParams, approved: bool, config: &Config) -> u8 {
    on_the_store(store_only(config), async |runtime| {
        answer_here(runtime, &params, approved).await
    })
    .await
}

/// Answers `params` on `runtime`, and says what comes of it.
async fn answer_here(runtime: &Runtime, params: &AnswerParams, approved: bool) -> u8 {
    let id = params.request_id.as_str();
    let by = params.by.as_deref().unwrap_or("ryvos (store)");
    let answer = ryvos::Answer {
        approved,
        reason: params.reason.clone(),
        by: by.to_owned(),
        always: params.always,
    };
    if let Err(e) = runtime.answer(id, answer).await {
        eprintln!("ryvos: {e}");
        return EXIT_RUN_FAILED;
    }
    let said = if approved { "approved" } else { "denied" };
    let session = (runtime.pending_approvals().into_iter())
        .find(|p| p.request_id == id)
        .map(|p| p.session_id);
    match session {
        Some(s) => {
            outln!("{said}; the session's next run takes the answer: `ryvos run --resume {s}`")
        }
        None => outln!("{said}"),
    }
    0
}
