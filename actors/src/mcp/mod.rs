//! Tools from Model Context Protocol servers (`[mcp.servers.NAME]`).
//!
//! The [`hub`] supervises one [`server`] actor per configured server; each starts its server,
//! lists its tools into the [`ToolRegistry`](crate::tools::ToolRegistry) as `NAME__tool`
//! ([`tool`]), and fails when its connection drops, to be restarted. Calls reach the server
//! through its [`link`]; every call passes the security gate like any other. [`status`] is what
//! runs, `ryvos status` and `ryvos mcp list` read.

mod client;
mod hub;
mod link;
mod sessions;
mod status;
mod tool;

pub(crate) use hub::{McpHub, McpHubArgs, McpMsg};
pub(crate) use sessions::SessionServers;
pub use sessions::SessionTools;
pub use status::McpServers;
