//! The daemon's status, as the socket's `status` and the console show it.

use super::Shared;
use ryvos::protocol::{StatusResult, PROTOCOL_VERSION};

/// What the daemon is and holds now: its process, sandbox, store, MCP servers, parked runs and
/// console.
pub(super) async fn status(shared: &Shared) -> StatusResult {
    let sandbox = shared.runtime.sandbox();
    let store = shared.runtime.shared_store();
    let queue_depth = match store.queue_depth().await {
        Ok(depth) => depth,
        Err(e) => {
            tracing::warn!("{e}");
            None
        }
    };
    let parked = shared.runtime.parked_runs().await.unwrap_or_else(|e| {
        tracing::warn!("listing the parked runs: {e}");
        Vec::new()
    });
    StatusResult {
        parked,
        in_flight: shared.runtime.runs_in_flight_listed(),
        daemon_id: store.node().map(str::to_owned),
        leases: store.node().map(|_| store.leases_held()),
        queue_depth,
        queued_runs_here: store.node().map(|_| shared.local.count()),
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        protocol: PROTOCOL_VERSION,
        home: shared.config.home.display().to_string(),
        socket: shared.socket.display().to_string(),
        uptime_secs: shared.started.elapsed().as_secs(),
        sandbox: sandbox.describe(),
        sandbox_enforced: sandbox.unenforceable().is_none(),
        sandbox_warning: sandbox.run_warning(),
        console: shared.console.as_ref().map(|c| c.origin.clone()),
        store: shared.runtime.store_backend().to_owned(),
        mcp: shared.runtime.mcp_servers_now(),
        config: shared
            .config
            .source
            .as_ref()
            .map(|p| p.display().to_string()),
        store_fault: shared.runtime.store_fault(),
        store_security: shared.runtime.store_security(),
    }
}
