//! Answering approval requests from the terminal that started the run: when stdin is a
//! terminal (and the output is not `--json`), an `ApprovalRequested` is asked about right
//! there, and the answer goes to the runtime in this process or to the daemon. Elsewhere the
//! request waits for `ryvos approve` / `ryvos deny`, or its timeout.

use ryvos::client::Client;
use ryvos::protocol::{AnswerParams, Approve, Deny};
use ryvos::{Answer, Approvals};
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

/// Who answered, for the audit.
const BY: &str = "ryvos run (terminal)";

/// Whether requests are asked about inline.
pub fn wanted(json: bool) -> bool {
    !json && std::io::stdin().is_terminal()
}

/// One question at a time: calls of one answer may ask together.
static ASKING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Asks on the terminal; `None` when stdin is closed. (A question left unanswered when its
/// request times out is answered by the next line; the late answer is then refused and said.)
async fn ask(request_id: String) -> Option<bool> {
    let _turn = ASKING.lock().await;
    tokio::task::spawn_blocking(move || {
        eprint!("  [approval] approve {request_id}? [y/N] ");
        std::io::stderr().flush().ok();
        let mut line = String::new();
        let read = std::io::stdin().lock().read_line(&mut line).ok()?;
        (read > 0).then(|| matches!(line.trim(), "y" | "Y" | "yes"))
    })
    .await
    .ok()
    .flatten()
}

fn answer(approved: bool) -> Answer {
    Answer {
        approved,
        reason: (!approved).then(|| "denied at the terminal".to_owned()),
        by: BY.to_owned(),
        always: false,
    }
}

/// Asks about `request_id` and answers the runtime in this process.
pub fn answer_local(approvals: Approvals, request_id: String) {
    tokio::spawn(async move {
        let Some(approved) = ask(request_id.clone()).await else {
            return;
        };
        if let Err(e) = approvals.answer(&request_id, answer(approved)) {
            eprintln!("ryvos: {e}");
        }
    });
}

/// Asks about `request_id` and answers the daemon at `socket`.
pub fn answer_remote(socket: PathBuf, request_id: String) {
    tokio::spawn(async move {
        let Some(approved) = ask(request_id.clone()).await else {
            return;
        };
        let params = AnswerParams {
            request_id: request_id.clone(),
            reason: answer(approved).reason,
            always: false,
        };
        let answered = match Client::connect(&socket).await {
            Ok(mut client) => {
                let called = if approved {
                    client.call::<Approve>(&params).await
                } else {
                    client.call::<Deny>(&params).await
                };
                match called {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(e)) => Err(e.message),
                    Err(e) => Err(e.to_string()),
                }
            }
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = answered {
            eprintln!("ryvos: answering {request_id}: {e}");
        }
    });
}
