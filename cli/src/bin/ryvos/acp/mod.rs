//! `ryvos acp`: Ryvos as an Agent Client Protocol agent on stdin/stdout, for editors (Zed,
//! JetBrains IDEs, Neovim, Emacs) to start as their agent command. Its runs go to the running
//! daemon when one answers, so they outlive the editor, and run in this process otherwise.
//!
//! The connection's handlers run one at a time: each answers at once, except a prompt turn,
//! which runs in a task of its own (it asks the editor for permissions meanwhile).
//!
//! Stdout carries the protocol alone: everything else this process says goes to stderr.

mod files;
mod mcp;
mod modes;
mod sessions;
mod turn;
mod updates;

use crate::exit::EXIT_RUN_FAILED;
use crate::host::Host;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, CloseSessionRequest, CloseSessionResponse,
    CurrentModeUpdate, Error as SchemaError, ForkSessionRequest, ForkSessionResponse,
    Implementation, InitializeRequest, InitializeResponse, ListSessionsRequest,
    ListSessionsResponse, LoadSessionRequest, LoadSessionResponse, McpCapabilities,
    NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse,
    ResumeSessionRequest, ResumeSessionResponse, SessionCapabilities, SessionCloseCapabilities,
    SessionForkCapabilities, SessionId as AcpSessionId, SessionListCapabilities,
    SessionNotification, SessionResumeCapabilities, SessionUpdate, SetSessionModeRequest,
    SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{
    on_receive_notification, on_receive_request, Agent, Client, ConnectTo, Error, Stdio,
};
use modes::Mode;
use ryvos::config::Config;
use ryvos::SessionId;
use sessions::State;
use std::path::Path;
use std::sync::Arc;

/// Serves ACP on stdin/stdout until the editor leaves; the exit code.
pub async fn serve(config: Config, socket: std::path::PathBuf) -> u8 {
    let host = match Host::find(config, socket, "acp").await {
        Ok(host) => host,
        Err(code) => return code,
    };
    let state = State::new(host);
    let served = agent(state.clone()).connect_to(Stdio::new()).await;
    let mut code = 0;
    if let Err(e) = served {
        eprintln!("ryvos acp: the connection to the editor failed: {e}");
        code = EXIT_RUN_FAILED;
    }
    if let Err(e) = state.host.close().await {
        eprintln!("ryvos acp: stopping the runtime: {e}");
        code = EXIT_RUN_FAILED;
    }
    code
}

/// The agent: one handler per ACP method it serves.
///
/// Long because it is one builder chain, a handler per method, each a few lines that hand the
/// work to a function of this module or of [`sessions`] and [`turn`].
fn agent(state: Arc<State>) -> impl ConnectTo<Client> {
    // Each handler keeps a handle of its own.
    let [s1, s2, s3, s4, s5, s6, s7, s8, s9, s10] = std::array::from_fn(|_| state.clone());
    Agent
        .v1()
        .name("ryvos")
        .on_receive_request(
            async move |r: InitializeRequest, to: Responder<InitializeResponse>, _| {
                s1.initialized(r.client_capabilities.clone());
                to.respond(initialized(r))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: NewSessionRequest, to: Responder<NewSessionResponse>, _| {
                to.respond_with_result(new_session(&s2, r))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: LoadSessionRequest, to: Responder<LoadSessionResponse>, cx| {
                let state = s3.clone();
                // Told from a task: a long history must not hold the connection.
                cx.clone().spawn(async move {
                    let loaded = load(&state, &r, &cx).await;
                    let waiting = loaded.as_ref().ok().cloned().unwrap_or_default();
                    let response = LoadSessionResponse::new().modes(Mode::default().state());
                    to.respond_with_result(loaded.map(|_| response))?;
                    if !waiting.is_empty() {
                        go_on(&state, &cx, &r.session_id, waiting).await;
                    }
                    Ok(())
                })
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: ResumeSessionRequest, to: Responder<ResumeSessionResponse>, cx| {
                let state = s4.clone();
                cx.spawn(async move {
                    let resumed = resume(&state, &r).await;
                    let response = ResumeSessionResponse::new().modes(Mode::default().state());
                    to.respond_with_result(resumed.map(|()| response))
                })
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: ForkSessionRequest, to: Responder<ForkSessionResponse>, cx| {
                let state = s10.clone();
                cx.spawn(async move { to.respond_with_result(fork(&state, &r).await) })
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: ListSessionsRequest, to: Responder<ListSessionsResponse>, cx| {
                let state = s5.clone();
                cx.spawn(
                    async move { to.respond_with_result(sessions::list(&state.host, &r).await) },
                )
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: CloseSessionRequest, to: Responder<CloseSessionResponse>, _| match s6
                .close(&r.session_id)
            {
                true => to.respond(CloseSessionResponse::new()),
                false => to.respond_with_error(SchemaError::session_not_found(r.session_id).into()),
            },
            on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CancelNotification, _: ConnectionTo<Client>| {
                s7.cancel_turn(&n.session_id);
                Ok(())
            },
            on_receive_notification!(),
        )
        .on_receive_request(
            async move |r: SetSessionModeRequest, to: Responder<SetSessionModeResponse>, cx| {
                let Some(mode) = Mode::named(&r.mode_id) else {
                    return to.respond_with_error(Error::invalid_params().data(format!(
                        "there is no mode {}: the modes are ask, auto-edit and full-auto",
                        r.mode_id.0
                    )));
                };
                if !s9.set_mode(&r.session_id, mode) {
                    return to
                        .respond_with_error(SchemaError::session_not_found(r.session_id).into());
                }
                to.respond(SetSessionModeResponse::new())?;
                let update = SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(r.mode_id));
                cx.send_notification(SessionNotification::new(r.session_id, update))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: PromptRequest, to: Responder<PromptResponse>, cx| {
                let (state, task_cx) = (s8.clone(), cx.clone());
                cx.spawn(
                    async move { to.respond_with_result(turn::prompt(&state, &task_cx, r).await) },
                )
            },
            on_receive_request!(),
        )
}

/// What Ryvos can do, as the editor is told.
fn initialized(request: InitializeRequest) -> InitializeResponse {
    let sessions = SessionCapabilities::new()
        .list(SessionListCapabilities::new())
        .resume(SessionResumeCapabilities::new())
        .close(SessionCloseCapabilities::new())
        .fork(SessionForkCapabilities::new());
    let capabilities = AgentCapabilities::new()
        .load_session(true)
        .mcp_capabilities(McpCapabilities::new().http(true))
        .prompt_capabilities(PromptCapabilities::new().embedded_context(true))
        .session_capabilities(sessions);
    InitializeResponse::new(request.protocol_version)
        .agent_info(Implementation::new("ryvos", env!("CARGO_PKG_VERSION")))
        .agent_capabilities(capabilities)
}

/// A new session working in the editor's `cwd`: Ryvos stores it with its first prompt.
fn new_session(state: &State, request: NewSessionRequest) -> Result<NewSessionResponse, Error> {
    let workspace = workspace_of(&request.cwd)?;
    let servers = mcp::servers_of(&request.mcp_servers)?;
    let session = SessionId::generate().to_string();
    state.open(&session, workspace, servers);
    Ok(NewSessionResponse::new(session).modes(Mode::default().state()))
}

/// Opens a stored session and tells its conversation again; the calls of it that wait for
/// approval while no run goes on (its daemon was killed meanwhile).
async fn load(
    state: &State,
    request: &LoadSessionRequest,
    cx: &ConnectionTo<Client>,
) -> Result<Vec<String>, Error> {
    let session = &request.session_id;
    let workspace = workspace_of(&request.cwd)?;
    let servers = mcp::servers_of(&request.mcp_servers)?;
    sessions::replay(&state.host, session, &workspace, cx).await?;
    state.open(&session.0, workspace, servers);
    let id = SessionId::new(&*session.0);
    let pending = state.host.pending(&id).await.map_err(sessions::internal)?;
    let paused = pending.into_iter().filter(|p| p.paused);
    Ok(paused.map(|p| p.call_id.to_string()).collect())
}

/// Goes on with a loaded session's run that stopped while a call waited for approval: the call
/// is asked again, and the run's updates follow as a prompt's would.
async fn go_on(
    state: &Arc<State>,
    cx: &ConnectionTo<Client>,
    session: &AcpSessionId,
    waiting: Vec<String>,
) {
    if let Err(e) = turn::go_on(state, cx, session, waiting).await {
        eprintln!("ryvos acp: going on with session {}: {e}", session.0);
    }
}

/// Opens a stored session without telling its conversation again.
async fn resume(state: &State, request: &ResumeSessionRequest) -> Result<(), Error> {
    let session = &request.session_id;
    let workspace = workspace_of(&request.cwd)?;
    let servers = mcp::servers_of(&request.mcp_servers)?;
    if !sessions::exists(&state.host, session).await? {
        return Err(SchemaError::session_not_found(session.clone()).into());
    }
    state.open(&session.0, workspace, servers);
    Ok(())
}

/// A new session with a stored session's conversation up to its latest turn, working in the
/// editor's `cwd`: the original's own workspace shares its files (only the conversation
/// forks); another directory, new or empty, gets a copy of them as they were at that turn.
async fn fork(state: &State, request: &ForkSessionRequest) -> Result<ForkSessionResponse, Error> {
    let workspace = workspace_or_new(&request.cwd)?;
    let servers = mcp::servers_of(&request.mcp_servers)?;
    let original = &request.session_id;
    let id = SessionId::new(&*original.0);
    let Some(history) = state.host.history(&id).await.map_err(sessions::internal)? else {
        return Err(SchemaError::session_not_found(original.clone()).into());
    };
    let Some(turn) = history.turns.last().map(|t| t.turn) else {
        return Err(Error::invalid_params().data(format!(
            "session {} has no turn to fork from yet",
            original.0
        )));
    };
    let params = ryvos::protocol::ForkParams {
        session: original.0.to_string(),
        turn: Some(turn),
        run: None,
        workspace: Some(workspace.display().to_string()),
    };
    let forked = state
        .host
        .fork(params)
        .await
        .map_err(|e| Error::invalid_params().data(e))?;
    state.open(&forked.session_id, workspace, servers);
    Ok(ForkSessionResponse::new(forked.session_id).modes(Mode::default().state()))
}

/// The directory `cwd` names, absolute; one that does not exist yet (a fork's copy) is made.
fn workspace_or_new(cwd: &Path) -> Result<std::path::PathBuf, Error> {
    if cwd.is_absolute() && !cwd.exists() {
        std::fs::create_dir_all(cwd).map_err(|e| {
            Error::invalid_params().data(format!("cwd {} cannot be made: {e}", cwd.display()))
        })?;
    }
    workspace_of(cwd)
}

/// The workspace the editor's `cwd` names: an absolute directory that exists.
fn workspace_of(cwd: &Path) -> Result<std::path::PathBuf, Error> {
    if !cwd.is_absolute() {
        return Err(Error::invalid_params().data(format!(
            "cwd must be an absolute path, not {}",
            cwd.display()
        )));
    }
    cwd.canonicalize().map_err(|e| {
        Error::invalid_params().data(format!("cwd {} cannot be used: {e}", cwd.display()))
    })
}
