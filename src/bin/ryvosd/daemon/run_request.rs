//! A socket `run` (or `submit`) request's parameters checked and turned into a run request.

use super::{canonical, Shared};
use ryvos::protocol::{ErrorBody, ErrorCode, RunParams};
use ryvos::{EngineError, StartRunError};
use ryvos::{RunRequest, RunSettings, RuntimeError};
use ryvos_protocol::ids::SessionId;
use std::path::Path;

/// The run `params` asks for; a session to resume must exist.
pub(super) async fn run_request(
    params: RunParams,
    shared: &Shared,
) -> Result<RunRequest, ErrorBody> {
    let bad = |message: String| ErrorBody::new(ErrorCode::BadRequest, message);
    if !std::path::Path::new(&params.workspace).is_absolute() {
        // Relative to what? The daemon's directory is not the client's.
        return Err(bad(format!(
            "workspace '{}' is relative: give an absolute directory",
            params.workspace
        )));
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
    let mut request = request_of(&params);
    if let Some(resume) = params.resume {
        let session = SessionId::new(resume);
        let known = shared.runtime.session(&session).await.map_err(internal)?;
        if known.is_none() {
            return Err(ErrorBody::new(
                ErrorCode::NotFound,
                format!("there is no session {session} to resume; `ryvos sessions` lists them"),
            ));
        }
        request = request.session(session);
    } else if let Some(session) = params.session {
        request = request.session(SessionId::new(session));
    }
    Ok(request)
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

/// The run `params` describe, on a new session (the caller says which session it continues).
pub(super) fn request_of(params: &RunParams) -> RunRequest {
    let mut request = RunRequest::new(params.prompt.clone()).workspace(params.workspace.clone());
    if let Some(cwd) = &params.cwd {
        request = request.caller_dir(cwd.clone());
    }
    if let Some(goal) = &params.goal {
        request = request.goal(goal.clone());
    }
    if let Some(traceparent) = &params.traceparent {
        request = request.traceparent(traceparent.clone());
    }
    if params.director {
        request = request.director();
    }
    request.settings = RunSettings {
        model: params.model.clone(),
        max_turns: params.max_turns,
        max_duration_secs: params.max_duration_secs,
        per_run_limit_cents: params.per_run_limit_cents,
    };
    request
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
