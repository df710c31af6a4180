//! What an MCP server is doing, as `status` and `ryvos mcp list` report it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One configured MCP server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct McpServerStatus {
    pub name: String,
    /// `stdio: COMMAND` or `http: URL`.
    pub transport: String,
    pub state: McpServerState,
    /// Why it is down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The names its tools are offered under (`NAME__tool`).
    pub tools: Vec<String>,
    /// The MCP revision it speaks with Ryvos (`2026-07-28`, `2025-11-25`, …), once connected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// How many times it was restarted.
    pub restarts: u32,
}

/// An MCP server's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum McpServerState {
    /// Starting, or restarting.
    Starting,
    /// Connected: its tools are offered.
    Ready,
    /// Not connected (see `reason`); it is restarted after a backoff.
    Down,
}
