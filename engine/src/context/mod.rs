//! Context management: keeping the conversation sent to the model within its budget.
//!
//! [`prune`] decides which leading messages to drop (never splitting a call from its result);
//! [`summary`] asks the model to compress them into one message first. The stored history is
//! never rewritten: the session keeps a window over it, and the store records where the window
//! starts and the summary that stands for what came before.

pub mod layers;
pub mod prune;
pub mod summary;

pub use prune::{prune_to_budget, Cut};
