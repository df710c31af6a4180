//! A socket `run` (or `submit`) request's parameters checked and turned into a run request.

use super::{canonical, Shared};
use ryvos::protocol::{ErrorBody, ErrorCode, RunParams};
use ryvos::{EngineError, StartRunError};
use ryvos::{RunRequest, RuntimeError};
use ryvos_protocol::ids::SessionId;
use std::path::Path;

/// The run `params` asks for; a session to resume must exist.
pub(super) async fn run_request(
    params: RunParams,
    shared: &Shared,
) -> Result<RunRequest, ErrorBody> {
    let bad = |message: String| ErrorBody::new(ErrorCode::BadRequest, message);
    // Relative to what? The daemon's directory is not the client's.
    for (key, dir) in [("workspace", &params.workspace), ("cwd", &params.cwd)] {
        if let Some(dir) = dir.as_deref().filter(|d| !Path::new(d).is_absolute()) {
            return Err(bad(format!(
                "{key} '{dir}' is relative: give an absolute directory"
            )));
        }
    }
    // The daemon's own directory is nobody's workspace: a new session works in the one given,
    // or in the client's.
    let new_session = params.resume.is_none() && params.session.is_none();
    if new_session && params.workspace.is_none() && params.cwd.is_none() {
        return Err(bad(
            "a new session needs its workspace: give workspace (an absolute directory), or cwd, \
             which then stands for it"
                .into(),
        ));
    }
    if params.session.is_some() && params.resume.is_some() {
        return Err(bad(
            "give session (use or create it) or resume (continue it, it must exist), not both"
                .into(),
        ));
    }
    if let Some(config) = &params.config {
        if !Path::new(config).is_absolute() {
            return Err(bad(format!(
                "config '{config}' is relative: give the absolute path of the config file"
            )));
        }
        same_config(config, shared)
            .map_err(|why| ErrorBody::new(ErrorCode::ConfigMismatch, why))?;
    }
    let mut request = RunRequest::from_params(&params);
    if new_session && request.workspace.is_none() {
        request = request.workspace(params.cwd.clone().unwrap_or_default());
    }
    if let Some(resume) = params.resume {
        let session = SessionId::new(resume);
        let known = shared.runtime.session(&session).await.map_err(internal)?;
        let Some(known) = known else {
            return Err(ErrorBody::new(
                ErrorCode::NotFound,
                format!("there is no session {session} to resume; `ryvos sessions` lists them"),
            ));
        };
        if known.workspace.is_none() {
            request = in_the_callers_directory(request, &params.cwd, &session)?;
        }
        request = request.session(session);
    } else if let Some(session) = params.session {
        let session = SessionId::new(session);
        if request.workspace.is_none() {
            let known = shared.runtime.session(&session).await.map_err(internal)?;
            if known.and_then(|s| s.workspace).is_none() {
                request = in_the_callers_directory(request, &params.cwd, &session)?;
            }
        }
        request = request.session(session);
    }
    Ok(request)
}

/// A run on `session`, which has no workspace on record and was given none, works in the
/// caller's directory, as a new session would.
fn in_the_callers_directory(
    request: RunRequest,
    cwd: &Option<String>,
    session: &SessionId,
) -> Result<RunRequest, ErrorBody> {
    if request.workspace.is_some() {
        return Ok(request);
    }
    match cwd.as_deref() {
        Some(dir) => Ok(request.workspace(dir)),
        None => Err(ErrorBody::new(
            ErrorCode::BadRequest,
            format!("session {session} has no workspace on record: give workspace"),
        )),
    }
}

/// Whether this daemon runs on the config file `asked` (the caller's `--config`): a run it
/// hosts uses the daemon's settings, so another file would be silently ignored.
fn same_config(asked: &str, shared: &Shared) -> Result<(), String> {
    if shared.config_file.as_deref() == Some(canonical(Path::new(asked)).as_path()) {
        return Ok(());
    }
    let ours = shared.config.source.as_deref().map_or_else(
        || "the built-in defaults".into(),
        |p| p.display().to_string(),
    );
    Err(format!(
        "the run names the config file {asked}, but this daemon read {ours} and hosts its runs \
         on that; leave `config` out to run on the daemon's settings, or stop the daemon \
         (`shutdown`, `ryvos shutdown`) to run on {asked} in-process"
    ))
}

/// The answer to a request the store failed.
pub(super) fn internal(e: impl std::fmt::Display) -> ErrorBody {
    ErrorBody::new(ErrorCode::Internal, e.to_string())
}

/// A run that could not start, as the socket answers it.
pub(super) fn run_error(e: RuntimeError) -> ErrorBody {
    match e {
        RuntimeError::Engine(EngineError::StartRun(e)) => {
            let code = match e {
                StartRunError::Busy { .. }
                | StartRunError::SessionBusy(_)
                | StartRunError::Recovering(_) => ErrorCode::Busy,
                StartRunError::ShuttingDown => ErrorCode::ShuttingDown,
                StartRunError::Settings(_) => ErrorCode::BadRequest,
                StartRunError::Spawn(_) | StartRunError::Unanswered(_) => ErrorCode::Internal,
            };
            ErrorBody::new(code, e.to_string())
        }
        RuntimeError::Workspace(e) => ErrorBody::new(ErrorCode::BadRequest, e.to_string()),
        e @ (RuntimeError::BadSessionId(_)
        | RuntimeError::BadGoal(_)
        | RuntimeError::BadRequest(_)) => ErrorBody::new(ErrorCode::BadRequest, e.to_string()),
        other => ErrorBody::new(ErrorCode::Internal, other.to_string()),
    }
}
