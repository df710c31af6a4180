//! Context management: keeping the conversation sent to the model within its budget.
//!
//! [`prune`] decides which leading messages to drop (never splitting a call from its result);
//! [`summary`] asks the model to compress them into one message first, and [`facts`] keeps
//! verbatim the exact facts the summary left out. The stored history is
//! never rewritten: the session keeps a window over it, and the store records where the window
//! starts and the summary that stands for what came before.

pub(crate) mod facts;
pub(crate) mod layers;
pub(crate) mod prune;
pub(crate) mod summary;

pub use prune::prune_to_budget;
pub(crate) use prune::Cut;
