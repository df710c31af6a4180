//! Answering approval requests from the terminal that started the run: when stdin is a
//! terminal (and the output is not `--json`), an `ApprovalRequested` is asked about right
//! there, and the answer goes to the runtime in this process or to the daemon. Elsewhere the
//! request waits for `ryvos approve` / `ryvos deny`, or its timeout.
//!
//! A request answered elsewhere first (another terminal, its timeout) withdraws the question:
//! its prompt is erased, so the resolution is shown on a clean line, and a line typed after
//! that is not taken as the answer to anything.

use ryvos::protocol::{AnswerParams, Approve, Deny};
use ryvos::{Answer, Approvals};
use ryvos_client::Client;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use tokio::sync::{mpsc, oneshot};

/// Who answered, for the audit.
const BY: &str = "ryvos run (terminal)";

/// Whether requests are asked about inline.
pub fn wanted(json: bool) -> bool {
    !json && std::io::stdin().is_terminal()
}

/// The question on the terminal now: its request, and how to withdraw it.
static OPEN: Mutex<Option<(String, oneshot::Sender<()>)>> = Mutex::new(None);

/// The terminal's lines, read by one thread for the whole process (a blocked read cannot be
/// cancelled, so it is never tied to one question). Its lock makes questions one at a time:
/// calls of one answer may ask together.
fn lines() -> &'static tokio::sync::Mutex<mpsc::Receiver<String>> {
    static LINES: OnceLock<tokio::sync::Mutex<mpsc::Receiver<String>>> = OnceLock::new();
    LINES.get_or_init(|| {
        let (tx, rx) = mpsc::channel(4);
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if tx.blocking_send(line).is_err() {
                    break;
                }
            }
        });
        tokio::sync::Mutex::new(rx)
    })
}

/// Erases the question about `request_id` if it is still open: it was answered elsewhere.
pub fn withdraw(request_id: &str) {
    let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
    if open.as_ref().is_some_and(|(id, _)| id == request_id) {
        if let Some((_, cancel)) = open.take() {
            eprint!("\r\x1b[2K");
            // The asking task may be gone already; then there is nothing to withdraw.
            cancel.send(()).ok();
        }
    }
}

/// Asks on the terminal; `None` when stdin is closed or the question was withdrawn.
async fn ask(request_id: String) -> Option<bool> {
    let (cancel, withdrawn) = oneshot::channel();
    *OPEN.lock().unwrap_or_else(|p| p.into_inner()) = Some((request_id.clone(), cancel));
    let mut lines = lines().lock().await;
    // Lines typed while no question was open answer nothing.
    while lines.try_recv().is_ok() {}
    eprint!("  [approval] approve {request_id}? [y/N] ");
    std::io::stderr().flush().ok();
    let answer = tokio::select! {
        line = lines.recv() => line.map(|l| matches!(l.trim(), "y" | "Y" | "yes")),
        _ = withdrawn => None,
    };
    OPEN.lock().unwrap_or_else(|p| p.into_inner()).take();
    answer
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
            by: None,
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
