//! How `ryvos run` runs: through the daemon when one answers, else hosted in this process;
//! `--resume` and `--continue` resolved against the sessions either holds.

use crate::ctrl_c::CtrlC;
use crate::exit::{EXIT_DAEMON, EXIT_RUN_FAILED, EXIT_USAGE};
use crate::following::{follow_local, follow_remote, Followed, Following};
use ryvos::config::Config;
use ryvos::protocol::{NoParams, Run, RunParams, Sessions};
use ryvos::{RunRequest, Runtime, RuntimeError, SessionId};
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
    pub following: Following,
    /// The daemon's socket, to answer approval requests on.
    pub socket: PathBuf,
    /// The run, as the socket's `run` asks for it.
    pub params: RunParams,
}

pub async fn run_remote(client: Client, run: Remote) -> u8 {
    // Caught from before the run is asked for: a press in between must not end the client.
    let mut ctrl_c = CtrlC::listen();
    (remote_run(client, run, &mut ctrl_c).await).code
}

/// Asks the daemon on `client` for the run and follows it to its end.
pub async fn remote_run(mut client: Client, run: Remote, ctrl_c: &mut CtrlC) -> Followed {
    let Remote {
        following,
        socket,
        mut params,
    } = run;
    let not_run = |code| Followed {
        code,
        session: None,
    };
    if params.resume.as_deref() == Some("") {
        let workspace = match lookup_dir(params.workspace.as_deref()) {
            Ok(dir) => dir,
            Err(code) => return not_run(code),
        };
        params.resume = match latest_remote(&mut client, &workspace).await {
            Ok(id) => Some(id),
            Err(code) => return not_run(code),
        };
    }
    if let Err(e) = client.send::<Run>(&params).await {
        eprintln!("ryvos: {e}");
        return not_run(EXIT_DAEMON);
    }
    follow_remote(client, &following, socket, ctrl_c).await
}

/// A run hosted in this process.
pub struct Local {
    pub following: Following,
    pub record: Option<PathBuf>,
    /// The run, as the daemon would be asked for it: one road from the flags to a run.
    pub params: RunParams,
}

pub async fn run_local(config: Config, local: Local) -> u8 {
    let runtime = match start_local(&config, local.record.as_deref()).await {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let mut ctrl_c = CtrlC::listen();
    let code = (local_run(&runtime, local.params, &local.following, &mut ctrl_c).await).code;
    closed(runtime, code).await
}

/// `code`, once `runtime` is closed (its last turns stored); a runtime that cannot close fails
/// the command.
async fn closed(runtime: Runtime, code: u8) -> u8 {
    match runtime.close().await {
        Ok(()) => code,
        Err(e) => {
            eprintln!("ryvos: stopping the runtime: {e}");
            EXIT_RUN_FAILED
        }
    }
}

/// Starts the run `params` ask for on `runtime`, in this process, and follows it to its end.
pub async fn local_run(
    runtime: &Runtime,
    mut params: RunParams,
    following: &Following,
    ctrl_c: &mut CtrlC,
) -> Followed {
    let workspace = params.workspace.as_deref().map(std::path::Path::new);
    let resume = match resume_local(runtime, params.resume.take(), workspace).await {
        Ok(resume) => resume,
        Err(code) => {
            return Followed {
                code,
                session: None,
            }
        }
    };
    let mut request = RunRequest::from_params(&params);
    if let Some(s) = params.session.take().or(resume) {
        request = request.session(SessionId::new(s));
    }
    match runtime.run(request).await {
        Ok(handle) => follow_local(runtime, handle, following, ctrl_c).await,
        Err(e) => {
            eprintln!("ryvos: {e}");
            Followed {
                code: EXIT_RUN_FAILED,
                session: None,
            }
        }
    }
}

/// Follows the run `started` in this process, then closes the runtime; the exit code.
pub async fn host_here(
    runtime: Runtime,
    started: Result<ryvos::RunHandle, RuntimeError>,
    following: &Following,
    ctrl_c: &mut CtrlC,
) -> u8 {
    let code = match started {
        Ok(handle) => (follow_local(&runtime, handle, following, ctrl_c).await).code,
        Err(e) => {
            eprintln!("ryvos: {e}");
            EXIT_RUN_FAILED
        }
    };
    closed(runtime, code).await
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
