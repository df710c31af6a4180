//! The A2A door (A2A 1.0, JSON-RPC binding) on the console's listener, on when `[a2a]
//! workspace` is set: other agents hand Ryvos work as messages, each a run in that workspace,
//! and follow it as a task. Same tokens and TLS rules as the console's API.

mod begun;
mod card;
mod found;
mod push;
mod push_configs;
mod refusal;
mod rpc;
mod send;
mod stream;
mod tasks;

pub(super) use begun::Begun;
pub(super) use card::card;
pub(crate) use push::Pushes;
pub(super) use rpc::rpc;
