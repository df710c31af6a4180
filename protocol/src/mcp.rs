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

/// An MCP server a caller brings for its session (`run`'s `mcp_servers`; an editor's, through
/// ACP): the daemon starts it for the session's runs, which alone are offered its tools.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionMcpServer {
    /// Its tools are offered as `NAME__tool`: letters, digits, '-' and single '_'.
    pub name: String,
    /// The program to start (stdio transport); give this or `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Set in its environment.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, String>,
    /// Its endpoint (Streamable HTTP), instead of `command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Sent with every HTTP request.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub headers: std::collections::BTreeMap<String, String>,
}
