//! The socket protocol between `ryvos` (or any client) and `ryvosd`: its types live in
//! [`ryvos_protocol::socket`], shared with every client. See docs/protocol.md.

pub use ryvos_protocol::socket::*;
