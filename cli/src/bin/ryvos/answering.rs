//! `ryvos approve` and `ryvos deny`: through the daemon when one answers; with none, a request
//! kept in the store (its run paused, or the daemon stopped) is answered there, and the
//! session's next run takes the answer.

use crate::exit::{EXIT_DAEMON, EXIT_RUN_FAILED};
use crate::out::outln;
use crate::reading::call;
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
    let mut config = config.clone();
    // Answering needs the store only.
    config.mcp = Default::default();
    let runtime = match Runtime::start(config).await {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("ryvos: no daemon answers, and the store cannot be opened: {e}");
            return EXIT_RUN_FAILED;
        }
    };
    let id = params.request_id.as_str();
    let by = params.by.as_deref().unwrap_or("ryvos (store)");
    let answered = match (approved, params.always) {
        (true, true) => runtime.approve_always(id, params.reason.clone(), by).await,
        _ => (runtime.answer_approval(id, approved, params.reason.clone(), by)).await,
    };
    let session = (runtime.pending_approvals().into_iter())
        .find(|p| p.request_id == id)
        .map(|p| p.session_id);
    let code = match answered {
        Ok(()) => {
            let said = if approved { "approved" } else { "denied" };
            match session {
                Some(s) => outln!(
                    "{said}; the session's next run takes the answer: `ryvos run --resume {s}`"
                ),
                None => outln!("{said}"),
            }
            0
        }
        Err(e) => {
            eprintln!("ryvos: {e}");
            EXIT_RUN_FAILED
        }
    };
    if let Err(e) = runtime.close().await {
        eprintln!("ryvos: closing the store: {e}");
        return EXIT_RUN_FAILED;
    }
    code
}
