//! The editor's sessions: ACP's session ids are Ryvos's, so a session made in an editor is
//! one `ryvos sessions` lists, and one stored by Ryvos can be listed, loaded (its messages told
//! again) and resumed from the editor, after either side restarted.

use super::modes::Mode;
use super::updates::replayed;
use crate::host::Host;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, Error as SchemaError, ListSessionsRequest, ListSessionsResponse,
    SessionId as AcpSessionId, SessionInfo, SessionNotification,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Client, Error};
use ryvos::SessionId;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// What the agent keeps while the editor is connected.
pub struct State {
    pub host: Arc<Host>,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    client: ClientCapabilities,
    open: HashMap<String, Open>,
}

/// A session the editor has open.
#[derive(Clone)]
pub struct Open {
    /// Where its runs work: the editor's `cwd`.
    pub workspace: PathBuf,
    /// How much of what the policy asks about is answered without asking the editor.
    pub mode: Mode,
    /// The editor's MCP servers, for each run of the session.
    pub mcp_servers: Vec<ryvos::protocol::mcp::SessionMcpServer>,
    /// Set while a prompt turn is in flight; `true` once the editor cancels it.
    pub cancelled: Option<Arc<watch::Sender<bool>>>,
}

impl State {
    pub fn new(host: Host) -> Arc<Self> {
        Arc::new(Self {
            host: Arc::new(host),
            inner: Mutex::default(),
        })
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps what the editor said it can do.
    pub fn initialized(&self, client: ClientCapabilities) {
        self.inner().client = client;
    }

    /// Whether the editor reads and writes text files for the runs (both, or neither is
    /// used: a run must not read one version of a file and write over another).
    pub fn edits_files(&self) -> bool {
        let fs = &self.inner().client.fs;
        fs.read_text_file && fs.write_text_file
    }

    /// Opens `session`, its runs working in `workspace` with the editor's `mcp_servers`.
    pub fn open(
        &self,
        session: &str,
        workspace: PathBuf,
        mcp_servers: Vec<ryvos::protocol::mcp::SessionMcpServer>,
    ) {
        let open = Open {
            workspace,
            mcp_servers,
            mode: Mode::default(),
            cancelled: None,
        };
        self.inner().open.insert(session.to_owned(), open);
    }

    /// The open session `session`, or the error an editor is given for another.
    pub fn opened(&self, session: &AcpSessionId) -> Result<Open, Error> {
        (self.inner().open.get(&*session.0).cloned())
            .ok_or_else(|| SchemaError::session_not_found(session.clone()).into())
    }

    /// The mode of the open session `session` (read without copying the rest of it).
    pub fn mode(&self, session: &AcpSessionId) -> Result<Mode, Error> {
        (self.inner().open.get(&*session.0).map(|o| o.mode))
            .ok_or_else(|| SchemaError::session_not_found(session.clone()).into())
    }

    /// Starts a turn on `session`; the flag the editor's cancel sets, or why it cannot start
    /// (another turn is in flight).
    pub fn begin_turn(&self, session: &AcpSessionId) -> Result<watch::Receiver<bool>, Error> {
        let mut inner = self.inner();
        let Some(open) = inner.open.get_mut(&*session.0) else {
            return Err(SchemaError::session_not_found(session.clone()).into());
        };
        if open.cancelled.is_some() {
            return Err(Error::invalid_request().data(format!(
                "session {} already has a prompt turn in flight: wait for its end, or cancel it",
                session.0
            )));
        }
        let (cancel, cancelled) = watch::channel(false);
        open.cancelled = Some(Arc::new(cancel));
        Ok(cancelled)
    }

    /// The turn on `session` has ended.
    pub fn end_turn(&self, session: &AcpSessionId) {
        if let Some(open) = self.inner().open.get_mut(&*session.0) {
            open.cancelled = None;
        }
    }

    /// Puts `session` in `mode`; whether it is open.
    pub fn set_mode(&self, session: &AcpSessionId, mode: Mode) -> bool {
        let mut inner = self.inner();
        let open = inner.open.get_mut(&*session.0);
        open.map(|open| open.mode = mode).is_some()
    }

    /// The editor cancels `session`'s turn; whether one was in flight.
    pub fn cancel_turn(&self, session: &AcpSessionId) -> bool {
        let inner = self.inner();
        let turn = inner
            .open
            .get(&*session.0)
            .and_then(|o| o.cancelled.clone());
        turn.map(|cancel| cancel.send_replace(true)).is_some()
    }

    /// Closes `session` (its turn in flight, if any, is cancelled); whether it was open.
    pub fn close(&self, session: &AcpSessionId) -> bool {
        let open = self.inner().open.remove(&*session.0);
        if let Some(cancel) = open.as_ref().and_then(|o| o.cancelled.as_ref()) {
            cancel.send_replace(true);
        }
        open.is_some()
    }
}

/// Ryvos's sessions as the editor lists them, those working in `cwd` alone when it is given.
pub async fn list(
    host: &Host,
    request: &ListSessionsRequest,
) -> Result<ListSessionsResponse, Error> {
    let sessions = host.sessions().await.map_err(internal)?;
    let infos = (sessions.into_iter())
        .filter_map(|s| {
            let workspace = PathBuf::from(s.workspace.as_deref()?);
            let wanted = request.cwd.as_deref().is_none_or(|cwd| cwd == workspace);
            let info = SessionInfo::new(s.session_id.to_string(), workspace)
                .title(s.title)
                .updated_at(rfc3339(s.updated_at_ms));
            wanted.then_some(info)
        })
        .collect();
    Ok(ListSessionsResponse::new(infos))
}

/// Tells the editor `session`'s stored conversation again, as updates; whether it exists.
pub async fn replay(
    host: &Host,
    session: &AcpSessionId,
    workspace: &Path,
    cx: &ConnectionTo<Client>,
) -> Result<(), Error> {
    let id = SessionId::new(&*session.0);
    let Some(history) = host.history(&id).await.map_err(internal)? else {
        return Err(SchemaError::session_not_found(session.clone()).into());
    };
    let messages: Vec<_> = history.messages.iter().map(|m| &*m.message).collect();
    for update in replayed(&messages, workspace) {
        cx.send_notification(SessionNotification::new(session.clone(), update))?;
    }
    Ok(())
}

/// Whether Ryvos has stored `session`.
pub async fn exists(host: &Host, session: &AcpSessionId) -> Result<bool, Error> {
    let id = SessionId::new(&*session.0);
    Ok(host.history(&id).await.map_err(internal)?.is_some())
}

/// A failure of Ryvos's, as the editor is told it.
pub fn internal(why: String) -> Error {
    Error::internal_error().data(why)
}

/// `ms` since the epoch as an RFC 3339 time (UTC).
fn rfc3339(ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(at).to_string()
}
