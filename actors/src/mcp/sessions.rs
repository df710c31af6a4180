//! The MCP servers a caller brings for one session (an editor's, through ACP): started on the
//! first run of the session that names them, supervised as configured servers are (a hub of
//! their own), their tools offered to that session's runs alone (an overlay on the runtime's
//! tools). They are stopped when a run names other servers, after [`IDLE`] without a run, and
//! with the runtime.

use super::hub::{McpHub, McpHubArgs, McpMsg};
use super::status::McpServers;
use crate::config::{McpConfig, McpServerConfig, SupervisionConfig};
use crate::ids::SessionId;
use crate::tools::ToolRegistry;
use ractor::{Actor, ActorRef};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How long a session's servers outlive its last run.
const IDLE: Duration = Duration::from_secs(10 * 60);
/// How often idle servers are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// What a run of a session with servers of its own is given: the tools it is offered, and
/// how the servers stand. Held by the run, it keeps them from being stopped as idle.
#[derive(Clone)]
pub struct SessionTools {
    pub(crate) registry: ToolRegistry,
    pub(crate) status: McpServers,
    _in_use: Arc<()>,
}

/// Every session's servers.
#[derive(Clone)]
pub(crate) struct SessionServers {
    held: Arc<Mutex<HashMap<SessionId, Held>>>,
    base: ToolRegistry,
    supervision: SupervisionConfig,
}

/// One session's servers, running.
struct Held {
    servers: BTreeMap<String, McpServerConfig>,
    tools: SessionTools,
    hub: ActorRef<McpMsg>,
    last_used: Instant,
}

impl Held {
    fn idle(&self) -> bool {
        Arc::strong_count(&self.tools._in_use) == 1 && self.last_used.elapsed() >= IDLE
    }
}

impl SessionServers {
    /// None yet; their tools offered over `base`'s. Idle ones are stopped from now on.
    pub(crate) fn new(base: ToolRegistry, supervision: SupervisionConfig) -> Self {
        let servers = Self {
            held: Arc::default(),
            base,
            supervision,
        };
        tokio::spawn(sweep(Arc::downgrade(&servers.held)));
        servers
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The tools of `session`'s runs with `servers`: those already running when they are the
    /// same, else `servers` started (in place of the session's others, unless a run still uses
    /// them: then `None`).
    pub(crate) async fn tools_for(
        &self,
        session: &SessionId,
        servers: &BTreeMap<String, McpServerConfig>,
    ) -> Result<Option<SessionTools>, String> {
        let replaced = {
            let mut held = self.held();
            if let Some(running) = held.get_mut(session) {
                if running.servers == *servers {
                    running.last_used = Instant::now();
                    return Ok(Some(running.tools.clone()));
                }
                if Arc::strong_count(&running.tools._in_use) > 1 {
                    return Ok(None);
                }
            }
            held.remove(session)
        };
        if let Some(replaced) = replaced {
            replaced
                .hub
                .stop(Some("the session's runs name other MCP servers".into()));
        }
        let config = McpConfig {
            servers: servers.clone(),
        };
        let tools = SessionTools {
            registry: self.base.overlay(),
            status: McpServers::new(&config),
            _in_use: Arc::new(()),
        };
        let args = McpHubArgs {
            config,
            registry: tools.registry.clone(),
            servers: tools.status.clone(),
            supervision: self.supervision.clone(),
        };
        let (hub, _) = Actor::spawn(None, McpHub, args)
            .await
            .map_err(|e| format!("the session's MCP servers could not start: {e}"))?;
        let running = Held {
            servers: servers.clone(),
            tools: tools.clone(),
            hub,
            last_used: Instant::now(),
        };
        if let Some(raced) = self.held().insert(session.clone(), running) {
            raced.hub.stop(None);
        }
        Ok(Some(tools))
    }

    /// Stops every session's servers (the runtime stops).
    pub(crate) fn stop_all(&self) {
        for (_, held) in self.held().drain() {
            held.hub.stop(Some("shutdown".into()));
        }
    }
}

/// Stops the servers of sessions idle for [`IDLE`], every [`SWEEP_EVERY`], until the runtime's
/// servers are gone.
async fn sweep(held: Weak<Mutex<HashMap<SessionId, Held>>>) {
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        let Some(held) = held.upgrade() else {
            return;
        };
        let mut held = held.lock().unwrap_or_else(|p| p.into_inner());
        held.retain(|session, servers| {
            let idle = servers.idle();
            if idle {
                tracing::info!(session = %session, "stopping the session's idle MCP servers");
                servers.hub.stop(Some("idle".into()));
            }
            !idle
        });
    }
}
