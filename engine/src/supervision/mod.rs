//! Supervision: restart policies and stable addresses for restartable actors.
//!
//! Written for Ryvos rather than taken from a supervision crate because several runtimes must
//! live in one process (embedding hosts, tests) without global actor names, and a failed session
//! needs custom handling: its run is ended with a reason, never dropped silently.

mod policy;
mod slot;

pub(crate) use policy::{RestartDecision, RestartHistory, RestartPolicy};
pub(crate) use slot::ChildSlot;
#[cfg(feature = "testing")]
pub(crate) use slot::Unavailable;
