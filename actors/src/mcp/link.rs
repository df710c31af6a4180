//! The way from a server's tools to the server: its connection while it has one, else why not.
//! It outlives each connection, so a call made while the server restarts says so.

use rmcp::service::{Peer, RoleClient};
use std::sync::Mutex;

/// One server's current connection.
pub(crate) struct Link {
    server: String,
    peer: Mutex<Result<Peer<RoleClient>, String>>,
}

impl Link {
    pub(crate) fn new(server: &str) -> Self {
        Self {
            server: server.to_owned(),
            peer: Mutex::new(Err("it is starting".into())),
        }
    }

    /// The server's name.
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    /// The connection, or a message saying why there is none.
    pub(crate) fn peer(&self) -> Result<Peer<RoleClient>, String> {
        let peer = self.peer.lock().unwrap_or_else(|p| p.into_inner());
        peer.clone().map_err(|why| {
            format!(
                "the MCP server '{}' is not connected ({why}); it is restarted by itself, try \
                 again later",
                self.server
            )
        })
    }

    pub(crate) fn connected(&self, peer: Peer<RoleClient>) {
        *self.peer.lock().unwrap_or_else(|p| p.into_inner()) = Ok(peer);
    }

    /// Marks the connection gone, unless it is already known to be, and why.
    pub(crate) fn lost_if_connected(&self, why: &str) {
        let mut peer = self.peer.lock().unwrap_or_else(|p| p.into_inner());
        if peer.is_ok() {
            *peer = Err(why.to_owned());
        }
    }

    pub(crate) fn lost(&self, why: &str) {
        *self.peer.lock().unwrap_or_else(|p| p.into_inner()) = Err(why.to_owned());
    }
}
