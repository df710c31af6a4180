//! McpHub: the supervisor of the MCP servers. It starts one [`McpClientActor`] per configured
//! server with the runtime, restarts one that fails (its process died, its connection dropped,
//! it could not start) after a backoff that doubles up to `backoff_max_ms`, and never gives up
//! on one or lets one take the runtime down: a server that cannot run only makes its tools
//! unavailable. Stopping the hub stops every server and its processes.

use super::client::{McpClientActor, ServerArgs};
use super::link::Link;
use super::status::McpServers;
use crate::config::{McpConfig, SupervisionConfig};
use crate::tools::ToolRegistry;
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A server that ran this long before failing starts its backoff over.
const STABLE_AFTER: Duration = Duration::from_secs(30);

/// What the hub is started with.
#[derive(Clone)]
pub(crate) struct McpHubArgs {
    pub config: McpConfig,
    pub registry: ToolRegistry,
    pub servers: McpServers,
    pub supervision: SupervisionConfig,
}

pub(crate) enum McpMsg {
    /// Start (again) the server of this name.
    Start(String),
}

pub(crate) struct McpHub;

pub(crate) struct McpHubState {
    args: McpHubArgs,
    /// Cancelled when the hub stops: a server still starting gives up at once.
    stopping: CancellationToken,
    links: HashMap<String, Arc<Link>>,
    /// The running server actors, and when each started.
    running: HashMap<ActorId, (String, Instant)>,
    /// Failures in a row, by server.
    failures: HashMap<String, u32>,
}

impl Actor for McpHub {
    type Msg = McpMsg;
    type State = McpHubState;
    type Arguments = McpHubArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<McpMsg>,
        args: McpHubArgs,
    ) -> Result<McpHubState, ActorProcessingErr> {
        let links = args
            .config
            .servers
            .keys()
            .map(|name| (name.clone(), Arc::new(Link::new(name))))
            .collect();
        for name in args.config.servers.keys() {
            myself.cast(McpMsg::Start(name.clone()))?;
        }
        Ok(McpHubState {
            args,
            stopping: CancellationToken::new(),
            links,
            running: HashMap::new(),
            failures: HashMap::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<McpMsg>,
        msg: McpMsg,
        state: &mut McpHubState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            McpMsg::Start(name) => state.start(&myself, name).await,
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<McpMsg>,
        event: SupervisionEvent,
        state: &mut McpHubState,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, why) = match event {
            SupervisionEvent::ActorFailed(cell, e) => (cell, e.to_string()),
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                (cell, reason.unwrap_or_else(|| "it stopped".into()))
            }
            _ => return Ok(()),
        };
        if let Some((name, started)) = state.running.remove(&cell.get_id()) {
            state.restart_later(&myself, name, started, &why);
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<McpMsg>,
        state: &mut McpHubState,
    ) -> Result<(), ActorProcessingErr> {
        state.stopping.cancel();
        // Each server's own end ends its processes.
        myself
            .stop_children_and_wait(Some("shutdown".into()), Some(Duration::from_secs(10)))
            .await;
        Ok(())
    }
}

impl McpHubState {
    async fn start(&mut self, myself: &ActorRef<McpMsg>, name: String) {
        let (Some(config), Some(link)) =
            (self.args.config.servers.get(&name), self.links.get(&name))
        else {
            return;
        };
        let args = ServerArgs {
            name: name.clone(),
            config: config.clone(),
            registry: self.args.registry.clone(),
            servers: self.args.servers.clone(),
            link: link.clone(),
            stopping: self.stopping.child_token(),
        };
        match Actor::spawn_linked(None, McpClientActor, args, myself.get_cell()).await {
            Ok((server, _)) => {
                self.running.insert(server.get_id(), (name, Instant::now()));
            }
            Err(e) => {
                let why = format!("its actor could not start: {e}");
                self.args.servers.down(&name, &why);
                self.restart_later(myself, name, Instant::now(), &why);
            }
        }
    }

    /// Starts `name` again after its backoff.
    fn restart_later(
        &mut self,
        myself: &ActorRef<McpMsg>,
        name: String,
        started: Instant,
        why: &str,
    ) {
        let failures = self.failures.entry(name.clone()).or_default();
        if started.elapsed() >= STABLE_AFTER {
            *failures = 0;
        }
        let delay = backoff(&self.args.supervision, *failures);
        *failures = failures.saturating_add(1);
        tracing::warn!(server = %name, "MCP server failed ({why}); restarting in {delay:?}");
        self.args.servers.restarted(&name);
        myself.send_after(delay, move || McpMsg::Start(name));
    }
}

/// The wait before restart number `failures + 1`: doubling from `backoff_initial_ms`.
fn backoff(supervision: &SupervisionConfig, failures: u32) -> Duration {
    let initial = supervision.backoff_initial_ms.max(1);
    let ms = initial.saturating_mul(1u64 << failures.min(20));
    Duration::from_millis(ms.min(supervision.backoff_max_ms.max(initial)))
}
