//! Supervision: restart policies and stable addresses for restartable actors.
//!
//! Written for Ryvos rather than taken from a supervision crate because several runtimes must
//! live in one process (embedding hosts, tests) without global actor names, and a failed session
//! needs custom handling: its run is ended with a reason, never dropped silently.

mod job_actor;
mod policy;
mod slot;

pub(crate) use job_actor::{JobActor, JobMsg, Work};
pub(crate) use policy::{RestartDecision, RestartHistory, RestartPolicy};
pub(crate) use slot::ChildSlot;
#[cfg(feature = "testing")]
pub(crate) use slot::Unavailable;

/// What a caught panic said, for the report of the failure it caused.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}
