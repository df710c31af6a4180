//! McpClientActor: one MCP server's connection. It starts the server (a child process in a
//! process group of its own), lists its tools into the registry, refreshes them when the server
//! says they changed, and fails when the connection drops, for the hub to restart it. When it
//! stops, the whole process group goes with it.

use super::link::Link;
use super::status::McpServers;
use super::tool::{said_effect, McpTool};
use crate::config::{expand_env, McpServerConfig};
use crate::tools::{Tool, ToolRegistry};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ProtocolVersion;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::RunningService;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::service::{NotificationContext, RoleClient, RunningServiceCancellationToken};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::ClientHandler;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// How many of the server's last stderr lines are kept, to say why it failed.
const STDERR_KEPT: usize = 5;
/// The longest line of it kept.
const STDERR_LINE_MAX: usize = 1024;

/// What a server actor is started with.
#[derive(Clone)]
pub(crate) struct ServerArgs {
    pub name: String,
    pub config: McpServerConfig,
    pub registry: ToolRegistry,
    pub servers: McpServers,
    pub link: Arc<Link>,
    /// Cancelled when the runtime stops: starting is given up.
    pub stopping: tokio_util::sync::CancellationToken,
}

pub(crate) enum ServerMsg {
    /// The server said its tools changed: list them again.
    ToolsChanged,
    /// The connection ended.
    Lost(String),
}

pub(crate) struct McpClientActor;

pub(crate) struct ServerState {
    args: ServerArgs,
    /// Stops the connection.
    connection: Option<RunningServiceCancellationToken>,
    /// The server's process group (its leader's pid).
    group: Option<i32>,
}

/// A live connection to a server.
type Connection = RunningService<RoleClient, Notifications>;

/// Tells the actor what the server announces, and introduces Ryvos to it.
struct Notifications {
    actor: ActorRef<ServerMsg>,
}

impl ClientHandler for Notifications {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if self.actor.cast(ServerMsg::ToolsChanged).is_err() {
            tracing::debug!("tools changed on a server whose actor has stopped");
        }
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.capabilities = ClientCapabilities::default();
        info.client_info = Implementation::new("ryvos", env!("CARGO_PKG_VERSION"));
        info
    }
}

impl Actor for McpClientActor {
    type Msg = ServerMsg;
    type State = ServerState;
    type Arguments = ServerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<ServerMsg>,
        args: ServerArgs,
    ) -> Result<ServerState, ActorProcessingErr> {
        Ok(ServerState {
            args,
            connection: None,
            group: None,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<ServerMsg>,
        state: &mut ServerState,
    ) -> Result<(), ActorProcessingErr> {
        let args = state.args.clone();
        args.servers.starting(&args.name);
        let limit = args.config.startup_timeout();
        // A stop cannot reach an actor before post_start returns: the runtime's stop cancels
        // the start instead.
        let started = tokio::select! {
            started = tokio::time::timeout(limit, state.connect(&myself)) => started,
            () = args.stopping.cancelled() => Ok(Err("the runtime is stopping".to_owned())),
        };
        let failed = match started {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(why)) => why,
            Err(_) => format!(
                "it did not answer within {}s ([mcp.servers.{}] startup_timeout_secs)",
                limit.as_secs(),
                args.name
            ),
        };
        Err(state.failed(failed))
    }

    async fn handle(
        &self,
        _myself: ActorRef<ServerMsg>,
        msg: ServerMsg,
        state: &mut ServerState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            ServerMsg::ToolsChanged => state.list_tools().await.map_err(Into::into),
            ServerMsg::Lost(why) => Err(state.failed(why)),
        }
    }
}

/// The server's processes and connection end with the actor's state, whichever way it ends:
/// ractor runs `post_stop` only after a clean stop, not after a failure.
impl Drop for ServerState {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.take() {
            connection.cancel();
        }
        if let Some(group) = self.group.take() {
            // The server and everything it started (npx starts node, which may start more).
            // SAFETY: kill only signals; the group is the one this actor started.
            if unsafe { libc::kill(-group, libc::SIGKILL) } != 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::ESRCH) {
                    tracing::warn!(server = %self.args.name, "stopping its processes: {e}");
                }
            }
        }
        self.args.link.lost_if_connected("it was stopped");
    }
}

impl ServerState {
    /// Reports the server down for `why`, and ends the actor with it (for the hub to restart).
    fn failed(&self, why: String) -> ActorProcessingErr {
        self.args.servers.down(&self.args.name, &why);
        self.args.link.lost(&why);
        why.into()
    }

    /// Starts (or reaches) the server, shakes hands and lists its tools; why not, if it
    /// cannot.
    async fn connect(&mut self, myself: &ActorRef<ServerMsg>) -> Result<(), String> {
        let handler = Notifications {
            actor: myself.clone(),
        };
        let service = match (&self.args.config.command, &self.args.config.url) {
            (Some(command), _) => {
                let command = command.clone();
                self.start_stdio(&command, handler).await?
            }
            (None, Some(url)) => reach_http(&self.args.config, url, handler).await?,
            (None, None) => return Err("it has neither command nor url".into()),
        };
        self.args.link.connected(service.peer().clone());
        self.connection = Some(service.cancellation_token());
        let me = myself.clone();
        tokio::spawn(async move {
            let why = match service.waiting().await {
                Ok(reason) => format!("the connection ended ({reason:?})"),
                Err(e) => format!("the connection failed ({e})"),
            };
            // After a stop, nobody needs to hear it.
            me.cast(ServerMsg::Lost(why)).ok();
        });
        self.list_tools().await
    }

    /// Starts `command` as a child process and shakes hands over its stdin and stdout.
    async fn start_stdio(
        &mut self,
        command: &str,
        handler: Notifications,
    ) -> Result<Connection, String> {
        let config = &self.args.config;
        let mut process = tokio::process::Command::new(expand(command, "command")?);
        for arg in &config.args {
            process.arg(expand(arg, "args")?);
        }
        for (key, value) in &config.env {
            process.env(key, expand(value, "env")?);
        }
        // A group of its own: stopping it reaches every process it started, and a Ctrl-C at
        // the terminal reaches Ryvos alone.
        process.process_group(0).kill_on_drop(true);
        let (transport, stderr) = TokioChildProcess::builder(process)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start `{command}`: {e}"))?;
        self.group = transport.id().map(|pid| pid as i32);
        let said = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(stderr) = stderr {
            tokio::spawn(log_stderr(self.args.name.clone(), stderr, said.clone()));
        }
        handler
            .serve_with_lifecycle(transport, lifecycle())
            .await
            .map_err(|e| {
                let last = said.lock().unwrap_or_else(|p| p.into_inner());
                let last: Vec<&str> = last.iter().map(String::as_str).collect();
                format!("the handshake failed ({e}); it said: {}", last.join(" | "))
            })
    }

    /// Lists the server's tools into the registry, as its group, within the startup timeout.
    async fn list_tools(&mut self) -> Result<(), String> {
        let args = &self.args;
        let peer = args.link.peer()?;
        let limit = args.config.startup_timeout();
        let listed = tokio::time::timeout(limit, peer.list_all_tools())
            .await
            .map_err(|_| format!("listing its tools took longer than {}s", limit.as_secs()))?
            .map_err(|e| format!("listing its tools failed: {e}"))?;
        let tools: Vec<Arc<dyn Tool>> = listed
            .iter()
            .filter(|t| args.config.offers(&t.name))
            .map(|t| {
                let effect = args.config.effect_of(&t.name, said_effect(t));
                Arc::new(McpTool::new(
                    &args.name,
                    t,
                    (args.config.tier_of(&t.name), effect),
                    args.config.call_timeout(),
                    args.link.clone(),
                )) as Arc<dyn Tool>
            })
            .collect();
        // One tool the registry cannot take (a bad schema, a name taken) leaves the others usable.
        for left_out in args.registry.replace_group(&args.name, tools) {
            tracing::warn!(server = %args.name, "a tool is left out: {left_out}");
        }
        let revision = peer
            .peer_info()
            .map(|info| info.protocol_version.to_string());
        args.servers
            .ready(&args.name, args.registry.group_names(&args.name), revision);
        Ok(())
    }
}

/// Shakes hands with the server at `url` (Streamable HTTP), sending its `headers`.
async fn reach_http(
    config: &McpServerConfig,
    url: &str,
    handler: Notifications,
) -> Result<Connection, String> {
    // reqwest's rustls needs the process's provider: ring, as the model providers use. Only the
    // first install takes; another one already in place is as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut headers = HashMap::new();
    for (name, value) in &config.headers {
        let value = expand(value, "headers")?;
        let name = HeaderName::try_from(name.as_str())
            .map_err(|e| format!("the header name '{name}': {e}"))?;
        let mut value = HeaderValue::try_from(value)
            .map_err(|e| format!("the value of the header {name}: {e}"))?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    let expanded = expand(url, "url")?;
    crate::config::check_http_url(&expanded).map_err(|why| format!("its url: {why}"))?;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(expanded).custom_headers(headers),
    );
    handler
        .serve_with_lifecycle(transport, lifecycle())
        .await
        .map_err(|e| format!("the handshake with {url} failed ({e})"))
}

/// How a connection starts: the newest revision the server offers, asked with
/// `server/discover` (MCP 2026-07-28: stateless, no `initialize` and no session), else the
/// `initialize` handshake of the revisions before it, for servers that do not know discovery.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: None,
    }
}

/// `value` of the server's `key`, with `${VAR}` expanded.
fn expand(value: &str, key: &str) -> Result<String, String> {
    expand_env(value, key).map_err(|e| e.to_string())
}

/// Logs what the server writes on stderr (at debug), keeping its last lines.
async fn log_stderr(
    server: String,
    stderr: tokio::process::ChildStderr,
    said: Arc<Mutex<VecDeque<String>>>,
) {
    use tokio::io::AsyncBufReadExt;
    let mut reader = tokio::io::BufReader::new(stderr);
    let mut line = Vec::new();
    // Read to the end whatever it writes (lines that are not UTF-8 too): a closed pipe would
    // make its next write fail.
    while let Ok(read @ 1..) = reader.read_until(b'\n', &mut line).await {
        let text = String::from_utf8_lossy(&line[..read.min(STDERR_LINE_MAX)])
            .trim_end()
            .to_owned();
        line.clear();
        tracing::debug!(%server, "{text}");
        let mut kept = said.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() == STDERR_KEPT {
            kept.pop_front();
        }
        kept.push_back(text);
    }
}
