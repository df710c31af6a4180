//! How `ryvos run` runs: through the daemon when one answers, else hosted in this process;
//! `--resume` and `--continue` resolved against the sessions either holds.

use crate::ctrl_c::{CtrlC, EXIT_INTERRUPTED};
use crate::exit::{exit_for, ExitFor, EXIT_DAEMON, EXIT_RUN_FAILED, EXIT_USAGE};
use crate::inline_approval;
use crate::render::Renderer;
use ryvos::config::Config;
use ryvos::protocol::{
    ErrorBody, ErrorCode, Interrupt, NoParams, Reply, Run, RunParams, SessionParams, Sessions,
};
use ryvos::{EventKind, RunRequest, Runtime, RuntimeError, SessionId};
use ryvos_client::Client;
use std::path::PathBuf;

/// The session `--resume` names, checked to exist, or (empty) the most recent session of
/// `workspace`; the exit code when there is none.
async fn resume_local(
    runtime: &Runtime,
    resume: Option<String>,
    workspace: Option<&std::path::Path>,
) -> Result<Option<String>, u8> {
    let Some(resume) = resume else {
        return Ok(None);
    };
    if resume.is_empty() {
        let workspace = lookup_dir(workspace.and_then(|w| w.to_str()))?;
        let workspace = workspace.as_path();
        let sessions = runtime.sessions().await.map_err(|e| {
            eprintln!("ryvos: {e}");
            EXIT_RUN_FAILED
        })?;
        return match latest_in(&sessions, workspace) {
            Some(id) => Ok(Some(id)),
            None => Err(no_session_in(workspace)),
        };
    }
    let id = SessionId::new(resume.as_str());
    match runtime.session(&id).await {
        Ok(Some(_)) => Ok(Some(resume)),
        Ok(None) => {
            eprintln!("ryvos: there is no session {resume} to resume; `ryvos sessions` lists them");
            Err(EXIT_RUN_FAILED)
        }
        Err(e) => {
            eprintln!("ryvos: {e}");
            Err(EXIT_RUN_FAILED)
        }
    }
}

/// The most recently updated of `sessions` whose latest run worked in `workspace`.
fn latest_in(
    sessions: &[ryvos::protocol::records::SessionRecord],
    workspace: &std::path::Path,
) -> Option<String> {
    let workspace = workspace.display().to_string();
    sessions
        .iter()
        .filter(|s| s.workspace.as_deref() == Some(workspace.as_str()))
        .max_by_key(|s| s.updated_at_ms)
        .map(|s| s.session_id.to_string())
}

/// The daemon's most recent session of `workspace`; the exit code when there is none.
async fn latest_remote(client: &mut Client, workspace: &std::path::Path) -> Result<String, u8> {
    match client.call::<Sessions>(&NoParams {}).await {
        Ok(Ok(sessions)) => latest_in(&sessions, workspace).ok_or_else(|| no_session_in(workspace)),
        Ok(Err(error)) => {
            eprintln!("ryvos: {}", error.message);
            Err(EXIT_RUN_FAILED)
        }
        Err(e) => {
            eprintln!("ryvos: {e}");
            Err(EXIT_DAEMON)
        }
    }
}

/// Where `--continue` looks for the latest session: `--workspace`, else here.
fn lookup_dir(workspace: Option<&str>) -> Result<PathBuf, u8> {
    match workspace {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => crate::workspace_dir::here().map_err(|e| {
            eprintln!("ryvos: {e}");
            EXIT_USAGE
        }),
    }
}

/// Says that `--continue` found nothing to continue; the exit code.
fn no_session_in(workspace: &std::path::Path) -> u8 {
    eprintln!(
        "ryvos: no session has run in {} yet; start one with `ryvos run PROMPT`",
        workspace.display()
    );
    EXIT_USAGE
}

/// A run hosted by the daemon.
pub struct Remote {
    pub json: bool,
    /// `-q`: only the final answer on stdout, errors on stderr.
    pub quiet: bool,
    /// The daemon's socket, to answer approval requests on.
    pub socket: PathBuf,
    /// The run, as the socket's `run` asks for it.
    pub params: RunParams,
}

pub async fn run_remote(mut client: Client, run: Remote) -> u8 {
    let Remote {
        json: json_out,
        quiet,
        socket,
        mut params,
    } = run;
    if params.resume.as_deref() == Some("") {
        let workspace = match lookup_dir(params.workspace.as_deref()) {
            Ok(dir) => dir,
            Err(code) => return code,
        };
        params.resume = match latest_remote(&mut client, &workspace).await {
            Ok(id) => Some(id),
            Err(code) => return code,
        };
    }
    // Caught from before the run is asked for: a press in between must not end the client.
    let ctrl_c = CtrlC::listen();
    if let Err(e) = client.send::<Run>(&params).await {
        eprintln!("ryvos: {e}");
        return EXIT_DAEMON;
    }
    follow_remote(client, (json_out, quiet), socket, ctrl_c, exit_for).await
}

/// Shows the events of the run the daemon streams on `client` as they come (answering its
/// approval requests at the terminal), then its end; the run's exit code. `ctrl_c` listens
/// from before the run was asked for.
pub async fn follow_remote(
    mut client: Client,
    (json_out, quiet): (bool, bool),
    socket: PathBuf,
    mut ctrl_c: CtrlC,
    exit: ExitFor,
) -> u8 {
    let inline = inline_approval::wanted(json_out);
    let mut renderer = Renderer::new(json_out).quiet(quiet);
    let mut session_seen: Option<String> = None;
    loop {
        let next = tokio::select! {
            reply = renderer.wait(client.next()) => reply,
            presses = ctrl_c.pressed() => {
                match ctrl_c_remote(presses, session_seen.as_deref(), &socket).await {
                    Some(code) => return code,
                    None => continue,
                }
            }
        };
        match next {
            Ok(Reply::Event { event, .. }) => {
                session_seen.get_or_insert_with(|| event.session_id.to_string());
                if let EventKind::ApprovalResolved { request_id, .. } = &event.kind {
                    inline_approval::withdraw(request_id);
                }
                renderer.show(&event);
                if let (true, EventKind::ApprovalRequested { request_id, .. }) =
                    (inline, &event.kind)
                {
                    inline_approval::answer_remote(socket.clone(), request_id.clone());
                }
            }
            Ok(Reply::Result { result, .. }) => {
                return ended_remote(result, &mut renderer, ctrl_c.was_pressed(), exit);
            }
            Ok(Reply::Error { error, .. }) => return refused(error),
            Err(e) => {
                let resume = session_seen
                    .map(|s| format!("; its completed turns are stored: `ryvos run --resume {s} ...` continues it"))
                    .unwrap_or_default();
                eprintln!("ryvos: lost ryvosd mid-run ({e}){resume}");
                return EXIT_DAEMON;
            }
        }
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
    if ctrl_c_pressed && outcome.status != ryvos::RunStatus::Completed {
        return EXIT_INTERRUPTED;
    }
    exit(outcome.status)
}

/// A run hosted in this process.
pub struct Local {
    pub json: bool,
    /// `-q`: only the final answer on stdout, errors on stderr.
    pub quiet: bool,
    pub record: Option<PathBuf>,
    /// The run, as the daemon would be asked for it: one road from the flags to a run.
    pub params: RunParams,
}

pub async fn run_local(config: Config, local: Local) -> u8 {
    let Local {
        json: json_out,
        quiet,
        record,
        mut params,
    } = local;
    let runtime = match start_local(&config, record.as_deref()).await {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let workspace = params.workspace.as_deref().map(std::path::Path::new);
    let resume = match resume_local(&runtime, params.resume.take(), workspace).await {
        Ok(resume) => resume,
        Err(code) => {
            if let Err(e) = runtime.close().await {
                eprintln!("ryvos: stopping the runtime: {e}");
            }
            return code;
        }
    };
    let mut request = RunRequest::from_params(&params);
    if let Some(s) = params.session.take().or(resume) {
        request = request.session(SessionId::new(s));
    }
    let ctrl_c = CtrlC::listen();
    let started = runtime.run(request).await;
    host_here(
        runtime,
        started,
        (json_out, quiet),
        (&config, exit_for),
        ctrl_c,
    )
    .await
}

/// Follows the run `started` in this process (`shown`: `--json`, `-q`), then closes the
/// runtime; the exit code.
pub async fn host_here(
    runtime: Runtime,
    started: Result<ryvos::RunHandle, RuntimeError>,
    (json_out, quiet): (bool, bool),
    (config, exit): (&Config, ExitFor),
    ctrl_c: CtrlC,
) -> u8 {
    let code = match started {
        Ok(handle) => {
            let renderer = Renderer::new(json_out).in_process().quiet(quiet);
            let inline = inline_approval::wanted(json_out);
            follow_local(&runtime, handle, (renderer, inline), (config, exit), ctrl_c).await
        }
        Err(e) => {
            eprintln!("ryvos: {e}");
            EXIT_RUN_FAILED
        }
    };
    if let Err(e) = runtime.close().await {
        eprintln!("ryvos: stopping the runtime: {e}");
        return EXIT_RUN_FAILED;
    }
    code
}

/// The runtime for a run hosted in this process (its model traffic recorded to `record`);
/// the exit code when it cannot start.
pub async fn start_local(config: &Config, record: Option<&std::path::Path>) -> Result<Runtime, u8> {
    // This process sends the model's API keys: their variables must be set here.
    if let Err(e) = ryvos::provider::keys_set(&config.model) {
        eprintln!("ryvos: {e}");
        return Err(EXIT_USAGE);
    }
    // Made private here rather than only in the runtime, to say so to the person at hand.
    match ryvos::make_home_private(&config.home) {
        Ok(tightened) => {
            for path in tightened {
                eprintln!(
                    "ryvos: warning: {} was open to other users; it is private now",
                    path.display()
                );
            }
        }
        Err(e) => {
            eprintln!("ryvos: {e}");
            return Err(EXIT_RUN_FAILED);
        }
    }
    let mut builder = Runtime::builder(config.clone());
    if let Some(path) = record {
        builder = builder.record_model_traffic(path);
        eprintln!("ryvos: recording the model traffic to {}", path.display());
    }
    builder.start().await.map_err(|e| {
        eprintln!("ryvos: {e}");
        match e {
            RuntimeError::Recording(_) => EXIT_USAGE,
            _ => EXIT_RUN_FAILED,
        }
    })
}

/// Shows the in-process run's events as they come and answers its approval requests at the
/// terminal; the run's exit code.
async fn follow_local(
    runtime: &Runtime,
    mut handle: ryvos::RunHandle,
    (mut renderer, inline): (Renderer, bool),
    (config, exit): (&Config, ExitFor),
    mut ctrl_c: CtrlC,
) -> u8 {
    let mut code = EXIT_RUN_FAILED;
    let session = handle.session_id.clone();
    loop {
        let event = tokio::select! {
            event = renderer.wait(handle.next_event()) => event,
            presses = ctrl_c.pressed() => {
                ctrl_c_local(presses, runtime, &session).await;
                continue;
            }
        };
        let Some(event) = event else { break };
        if let EventKind::ApprovalResolved { request_id, .. } = &event.kind {
            inline_approval::withdraw(request_id);
        }
        renderer.show(&event);
        if let EventKind::ApprovalRequested { request_id, .. } = &event.kind {
            if inline {
                inline_approval::answer_local(runtime.approvals(), request_id.clone());
            } else {
                // In-process, no other terminal can reach this run.
                eprintln!(
                    "ryvos: this run is hosted in-process and not at a terminal: nobody can \
                     answer {request_id}; it is denied after approval_timeout_secs ({}s). Run \
                     ryvosd to answer from another terminal.",
                    config.security.approval_timeout_secs
                );
            }
        }
        if let Some(o) = ryvos::RunOutcome::from_event(&event) {
            renderer.finish(o.status, o.reason.as_deref(), o.session_id.as_str());
            code = match ctrl_c.was_pressed() && o.status != ryvos::RunStatus::Completed {
                true => EXIT_INTERRUPTED,
                false => exit(o.status),
            };
        }
    }
    code
}

/// Ctrl-C in-process: the first press interrupts the run after its current step, the next
/// cancels it at once, and a third quits without waiting. The run's end is reported as any
/// end is.
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
/// interrupt the run after its current step, the next detaches; `Some(code)` to exit with.
async fn ctrl_c_remote(
    presses: u32,
    session: Option<&str>,
    socket: &std::path::Path,
) -> Option<u8> {
    let Some(session) = session else {
        eprintln!("\nryvos: detached before the run started; `ryvos sessions` lists it");
        return Some(EXIT_INTERRUPTED);
    };
    if presses > 1 {
        eprintln!(
            "\nryvos: detached; the run goes on in ryvosd (`ryvos history {session}` shows it, \
             `ryvos cancel {session}` stops it)"
        );
        return Some(EXIT_INTERRUPTED);
    }
    let params = SessionParams {
        session: session.to_owned(),
    };
    let asked = match Client::connect(socket).await {
        Ok(mut other) => other
            .call::<Interrupt>(&params)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match asked {
        Ok(Ok(_)) => eprintln!(
            "\nryvos: asked ryvosd to interrupt the run after its current step (Ctrl-C again \
             detaches)"
        ),
        Ok(Err(error)) => eprintln!("\nryvos: {}", error.message),
        Err(e) => eprintln!("\nryvos: interrupting the run: {e}"),
    }
    None
}
