//! Ryvos's plain data: ids, messages, events and their payloads, the records the store keeps,
//! and (at this module's root) the socket protocol between `ryvos` (or any client) and
//! `ryvosd` (see docs/protocol.md). The types live in the `ryvos-protocol` crate, shared with
//! every client.

pub use ryvos_protocol::socket::*;
pub use ryvos_protocol::{
    event, goal, hook, ids, mcp, message, plan, records, report, tier, verdict,
};
