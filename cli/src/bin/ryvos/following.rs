//! Following a run at the terminal, wherever it runs: its events shown as they come, its
//! approval requests asked about inline, Ctrl-C handled, and its end reported.
//!
//! Ctrl-C: the first press pauses the run after its current step. The second stops waiting:
//! in-process the run is cancelled at once; through the daemon `ryvos run` detaches and the
//! run goes on there, where `ryvos chat` stops the run instead (a chat is left with Ctrl-D,
//! not Ctrl-C). A parked run is waiting for a person already: Ctrl-C detaches at once.

use crate::calling::called;
use crate::ctrl_c::{CtrlC, EXIT_INTERRUPTED};
use crate::exit::{ExitFor, EXIT_DAEMON, EXIT_RUN_FAILED, EXIT_USAGE};
use crate::inline_approval::{self, Question};
use crate::render::Renderer;
use ryvos::config::Config;
use ryvos::protocol::records::ApprovalKind;
use ryvos::protocol::{Cancel, ErrorBody, ErrorCode, Interrupt, Reply, Run, SessionParams};
use ryvos::{Event, EventKind, Runtime, SessionId};
use ryvos_client::Client;
use std::path::PathBuf;
use std::time::Duration;

/// How a run is followed.
#[derive(Clone)]
pub struct Following {
    /// `--json`: one event per line on stdout.
    pub json: bool,
    /// `-q`: only the final answer on stdout, errors on stderr.
    pub quiet: bool,
    /// How the run's end becomes the exit code.
    pub exit: ExitFor,
    /// How long an approval request waits for an answer, counted down by its question.
    pub approval_timeout: Duration,
    /// In `ryvos chat`: Ctrl-C never leaves, a second press stops the run.
    pub in_chat: bool,
}

impl Following {
    /// A run followed as `config` says, shown as `json` and `quiet` ask.
    pub fn new(config: &Config, (json, quiet): (bool, bool), exit: ExitFor) -> Self {
        Self {
            json,
            quiet,
            exit,
            approval_timeout: Duration::from_secs(config.security.approval_timeout_secs.max(1)),
            in_chat: false,
        }
    }
}

/// How a followed run ended.
pub struct Followed {
    pub code: u8,
    /// The run's session, once it was told.
    pub session: Option<String>,
}

/// What the events so far said of the run.
#[derive(Default)]
struct Seen {
    session: Option<String>,
    workspace: Option<PathBuf>,
    /// The run parked, waiting for a person.
    parked: Option<String>,
}

impl Seen {
    /// Notes what `event` says; a run that pauses or parks is asked nothing more.
    async fn take_in(&mut self, event: &Event) {
        if matches!(
            event.kind,
            EventKind::RunParked { .. } | EventKind::Interrupt { .. }
        ) {
            inline_approval::withdraw_all().await;
        }
        self.session
            .get_or_insert_with(|| event.session_id.to_string());
        match &event.kind {
            EventKind::RunStarted { workspace, .. } => {
                self.workspace = Some(PathBuf::from(workspace));
            }
            EventKind::RunParked { .. } => self.parked = Some(event.run_id.to_string()),
            // It went on (`ryvos continue` from elsewhere).
            EventKind::TextDelta { .. } | EventKind::ToolStart { .. } => self.parked = None,
            EventKind::ApprovalResolved { request_id, .. } => inline_approval::withdraw(request_id),
            _ => {}
        }
    }

    /// The question an approval request `event` asks, if it is one.
    fn question(&self, event: &Event, following: &Following) -> Option<Question> {
        let EventKind::ApprovalRequested {
            request_id,
            tool,
            input,
            tier,
            kind,
            ..
        } = &event.kind
        else {
            return None;
        };
        Some(Question {
            request_id: request_id.clone(),
            tool: tool.clone(),
            input: input.clone(),
            workspace: self.workspace.clone(),
            timeout: following.approval_timeout,
            // The gate takes no "always" for these: it is not offered.
            always: *tier != ryvos::SafetyTier::T4 && *kind != ApprovalKind::InDoubt,
        })
    }
}

/// Shows the events of the run the daemon streams on `client` as they come (answering its
/// approval requests at the terminal), then its end. `ctrl_c` listens from before the run
/// was asked for.
pub async fn follow_remote(
    client: Client,
    following: &Following,
    socket: PathBuf,
    ctrl_c: &mut CtrlC,
) -> Followed {
    terminal_given_back(follow_remote_events(client, following, socket, ctrl_c)).await
}

/// `following`'s end, once no question about its run is left: none outlives the run it asks
/// about, and the terminal is given back first.
async fn terminal_given_back(following: impl std::future::Future<Output = Followed>) -> Followed {
    let followed = following.await;
    inline_approval::withdraw_all().await;
    followed
}

async fn follow_remote_events(
    mut client: Client,
    following: &Following,
    socket: PathBuf,
    ctrl_c: &mut CtrlC,
) -> Followed {
    let inline = inline_approval::wanted(following.json);
    let mut renderer = Renderer::new(following.json)
        .quiet(following.quiet)
        .in_chat(following.in_chat);
    let mut seen = Seen::default();
    loop {
        let next = tokio::select! {
            reply = renderer.wait(client.next()) => reply,
            presses = ctrl_c.pressed() => {
                match ctrl_c_remote(presses, &seen, &socket, following.in_chat).await {
                    Some(code) => return Followed { code, session: seen.session },
                    None => continue,
                }
            }
        };
        let code = match next {
            Ok(Reply::Event { event, .. }) => {
                seen.take_in(&event).await;
                renderer.show(&event);
                if let (true, Some(question)) = (inline, seen.question(&event, following)) {
                    inline_approval::answer_remote(socket.clone(), question);
                }
                continue;
            }
            Ok(Reply::Result { result, .. }) => {
                ended_remote(result, &mut renderer, ctrl_c.was_pressed(), following.exit)
            }
            Ok(Reply::Error { error, .. }) => refused(error),
            Err(e) => {
                let resume = (seen.session.as_ref())
                    .map(|s| format!("; its completed turns are stored: `ryvos run --resume {s} ...` continues it"))
                    .unwrap_or_default();
                eprintln!("ryvos: lost ryvosd mid-run ({e}){resume}");
                EXIT_DAEMON
            }
        };
        return Followed {
            code,
            session: seen.session,
        };
    }
}

/// Reports a run the daemon refused; the exit code.
fn refused(error: ErrorBody) -> u8 {
    eprintln!("ryvos: {}", error.message);
    match error.code {
        // A --config the daemon does not run on is a usage error, as in-process.
        ErrorCode::ConfigMismatch => EXIT_USAGE,
        _ => EXIT_RUN_FAILED,
    }
}

/// Reports the end of a run the daemon hosted; the exit code.
pub(crate) fn ended_remote(
    result: serde_json::Value,
    renderer: &mut Renderer,
    ctrl_c_pressed: bool,
    exit: ExitFor,
) -> u8 {
    let outcome = match Client::read::<Run>(result) {
        Ok(outcome) => outcome,
        Err(e) => {
            eprintln!("ryvos: {e}");
            return EXIT_DAEMON;
        }
    };
    renderer.finish(
        outcome.status,
        outcome.reason.as_deref(),
        outcome.session_id.as_str(),
    );
    end_code(outcome.status, ctrl_c_pressed, exit)
}

/// The exit code of a run that ended with `status`: as `exit` says, unless Ctrl-C stopped it
/// short of completing.
fn end_code(status: ryvos::RunStatus, ctrl_c_pressed: bool, exit: ExitFor) -> u8 {
    match ctrl_c_pressed && status != ryvos::RunStatus::Completed {
        true => EXIT_INTERRUPTED,
        false => exit(status),
    }
}

/// Shows the in-process run's events as they come and answers its approval requests at the
/// terminal; how the run ended.
pub async fn follow_local(
    runtime: &Runtime,
    handle: ryvos::RunHandle,
    following: &Following,
    ctrl_c: &mut CtrlC,
) -> Followed {
    terminal_given_back(follow_local_events(runtime, handle, following, ctrl_c)).await
}

async fn follow_local_events(
    runtime: &Runtime,
    mut handle: ryvos::RunHandle,
    following: &Following,
    ctrl_c: &mut CtrlC,
) -> Followed {
    let mut renderer = Renderer::new(following.json)
        .in_process()
        .quiet(following.quiet)
        .in_chat(following.in_chat);
    let inline = inline_approval::wanted(following.json);
    let mut code = EXIT_RUN_FAILED;
    let session = handle.session_id.clone();
    let mut seen = Seen::default();
    loop {
        let event = tokio::select! {
            event = renderer.wait(handle.next_event()) => event,
            presses = ctrl_c.pressed() => {
                ctrl_c_local(presses, runtime, &session).await;
                continue;
            }
        };
        let Some(event) = event else { break };
        seen.take_in(&event).await;
        renderer.show(&event);
        match (inline, seen.question(&event, following)) {
            (true, Some(question)) => {
                inline_approval::answer_local(runtime.approvals(), question);
            }
            // In-process, no other terminal can reach this run: nobody can answer, so it is
            // denied now rather than after the timeout.
            (false, Some(question)) => nobody_can_answer(runtime, &question.request_id),
            (_, None) => {}
        }
        if let Some(o) = ryvos::RunOutcome::from_event(&event) {
            renderer.finish(o.status, o.reason.as_deref(), o.session_id.as_str());
            code = end_code(o.status, ctrl_c.was_pressed(), following.exit);
        }
    }
    Followed {
        code,
        session: Some(session.to_string()),
    }
}

/// Denies `request_id` at once: the run is hosted here and not at a terminal, so nobody can
/// answer it.
fn nobody_can_answer(runtime: &Runtime, request_id: &str) {
    let why = "nobody can answer it: the run is hosted in-process, and asks at its terminal \
               only when stdin is one and the output is not --json (run ryvosd to answer from \
               another terminal, or allow the call in [security])";
    eprintln!("ryvos: {request_id} denied: {why}");
    let answer = ryvos::Answer {
        approved: false,
        reason: Some(why.to_owned()),
        by: "ryvos (no terminal)".to_owned(),
        always: false,
    };
    if let Err(e) = runtime.approvals().answer(request_id, answer) {
        eprintln!("ryvos: denying {request_id}: {e}");
    }
}

/// Ctrl-C in-process: the first press interrupts the run after its current step, the next
/// cancels it at once, and a third quits without waiting (in a chat too: the process is
/// stuck). The run's end is reported as any end is.
async fn ctrl_c_local(presses: u32, runtime: &Runtime, session: &SessionId) {
    if presses > 2 {
        eprintln!("\nryvos: quitting without waiting; the run's durable turns are stored");
        std::process::exit(EXIT_INTERRUPTED.into());
    }
    let (asked, doing) = if presses == 1 {
        let asked = runtime.interrupt(session).await;
        (
            asked,
            "interrupting the run after its current step (Ctrl-C again stops it now)",
        )
    } else {
        (runtime.cancel(session).await, "stopping the run now")
    };
    match asked {
        Ok(_) => eprintln!("\nryvos: {doing}"),
        Err(e) => eprintln!("\nryvos: {e}"),
    }
}

/// Ctrl-C through the daemon: the first press asks ryvosd (on a second connection) to
/// interrupt the run after its current step; the next detaches (`ryvos run`) or stops the run
/// (`ryvos chat`). `Some(code)` to stop following with.
async fn ctrl_c_remote(
    presses: u32,
    seen: &Seen,
    socket: &std::path::Path,
    in_chat: bool,
) -> Option<u8> {
    let Some(session) = seen.session.as_deref() else {
        eprintln!("\nryvos: detached before the run started; `ryvos sessions` lists it");
        return Some(EXIT_INTERRUPTED);
    };
    if let Some(run) = &seen.parked {
        eprintln!(
            "\nryvos: detached; run {run} stays parked until `ryvos continue {run}` or `ryvos \
             stop {run}`"
        );
        return Some(EXIT_INTERRUPTED);
    }
    if presses > 1 && !in_chat {
        eprintln!(
            "\nryvos: detached; the run goes on in ryvosd (`ryvos history {session}` shows it, \
             `ryvos cancel {session}` stops it)"
        );
        return Some(EXIT_INTERRUPTED);
    }
    let params = SessionParams {
        session: session.to_owned(),
    };
    // Asked on a second connection: this one carries the run's events.
    let asked = match presses {
        1 => called::<Interrupt>(socket, &params).await.map(drop),
        _ => called::<Cancel>(socket, &params).await.map(drop),
    };
    let doing = match (presses, in_chat) {
        (1, false) => {
            "asked ryvosd to interrupt the run after its current step (Ctrl-C again detaches)"
        }
        (1, true) => {
            "asked ryvosd to interrupt the run after its current step (Ctrl-C again stops it now)"
        }
        _ => "stopping the run now",
    };
    match asked {
        Ok(()) => eprintln!("\nryvos: {doing}"),
        Err(e) => eprintln!("\nryvos: {e}"),
    }
    None
}
