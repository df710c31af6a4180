//! What every configured MCP server is doing, for the runs (which wait for servers still
//! starting, and warn about those that are down), `ryvos status` and `ryvos mcp list`.

use crate::config::McpConfig;
use ryvos_protocol::mcp::{McpServerState, McpServerStatus};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

struct Entry {
    report: McpServerStatus,
    /// It has been `Ready` or `Down` at least once: runs no longer wait for it.
    settled: bool,
}

/// The servers' states, shared.
#[derive(Clone)]
pub struct McpServers {
    entries: Arc<Mutex<BTreeMap<String, Entry>>>,
    /// Bumped on every change, for those waiting on one.
    changed: watch::Sender<u64>,
    /// The longest a server may take to start: what a run waits at most.
    startup: Duration,
}

impl McpServers {
    /// Every server of `config`, starting.
    pub(crate) fn new(config: &McpConfig) -> Self {
        let transports = (config.servers.iter()).map(|(name, s)| (name.clone(), s.transport()));
        let entries = transports
            .into_iter()
            .map(|(name, transport)| {
                let report = McpServerStatus {
                    name: name.clone(),
                    transport,
                    state: McpServerState::Starting,
                    reason: None,
                    tools: Vec::new(),
                    revision: None,
                    restarts: 0,
                };
                (
                    name,
                    Entry {
                        report,
                        settled: false,
                    },
                )
            })
            .collect();
        Self {
            entries: Arc::new(Mutex::new(entries)),
            changed: watch::channel(0).0,
            startup: config.longest_startup(),
        }
    }

    fn update(&self, name: &str, change: impl FnOnce(&mut Entry)) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = entries.get_mut(name) {
            change(entry);
        }
        drop(entries);
        self.changed.send_modify(|n| *n += 1);
    }

    pub(crate) fn starting(&self, name: &str) {
        self.update(name, |e| e.report.state = McpServerState::Starting);
    }

    pub(crate) fn ready(&self, name: &str, tools: Vec<String>, revision: Option<String>) {
        self.update(name, |e| {
            e.report.state = McpServerState::Ready;
            e.report.reason = None;
            e.report.tools = tools;
            e.report.revision = revision;
            e.settled = true;
        });
    }

    pub(crate) fn down(&self, name: &str, reason: &str) {
        self.update(name, |e| {
            e.report.state = McpServerState::Down;
            e.report.reason = Some(reason.to_owned());
            e.settled = true;
        });
    }

    pub(crate) fn restarted(&self, name: &str) {
        self.update(name, |e| e.report.restarts += 1);
    }

    /// Every server, by name.
    pub fn reports(&self) -> Vec<McpServerStatus> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.values().map(|e| e.report.clone()).collect()
    }

    /// The servers that are down, with why.
    pub(crate) fn unavailable(&self) -> Vec<(String, String)> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        (entries.values())
            .filter(|e| e.report.state == McpServerState::Down)
            .map(|e| {
                (
                    e.report.name.clone(),
                    e.report.reason.clone().unwrap_or_default(),
                )
            })
            .collect()
    }

    /// Waits, at most the longest `startup_timeout_secs`, until every server has started or
    /// failed once: a run's first call then sees every tool it will have.
    pub async fn settled(&self) {
        let limit = self.startup;
        let mut changes = self.changed.subscribe();
        let all_settled = |entries: &BTreeMap<String, Entry>| entries.values().all(|e| e.settled);
        let wait = async {
            loop {
                {
                    let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
                    if all_settled(&entries) {
                        return;
                    }
                }
                if changes.changed().await.is_err() {
                    return;
                }
            }
        };
        if tokio::time::timeout(limit, wait).await.is_err() {
            tracing::warn!(
                "MCP servers still starting after {limit:?}; the run goes on without them"
            );
        }
    }
}
