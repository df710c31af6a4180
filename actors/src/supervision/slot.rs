//! A stable address for an actor that may be restarted.
//!
//! Actors talk to their siblings through a [`ChildSlot`] rather than a bare `ActorRef`: when a
//! supervisor restarts a child it puts the new incarnation in the slot, and every holder reaches
//! it on the next send. Reading the slot is one atomic load, no lock.

use arc_swap::ArcSwapOption;
use ractor::ActorRef;
use std::sync::Arc;

/// The current incarnation of a supervised actor, if it is up.
pub struct ChildSlot<M: ractor::Message> {
    name: &'static str,
    current: Arc<ArcSwapOption<ActorRef<M>>>,
}

impl<M: ractor::Message> Clone for ChildSlot<M> {
    fn clone(&self) -> Self {
        Self {
            name: self.name,
            current: self.current.clone(),
        }
    }
}

impl<M: ractor::Message> ChildSlot<M> {
    /// An empty slot for the actor called `name`.
    pub fn new(name: &'static str) -> Self {
        Self {
            name,
            current: Arc::new(ArcSwapOption::empty()),
        }
    }

    /// Puts a (re)started incarnation in the slot.
    pub fn set(&self, actor: ActorRef<M>) {
        self.current.store(Some(Arc::new(actor)));
    }

    /// Empties the slot: the actor is down.
    pub fn clear(&self) {
        self.current.store(None);
    }

    /// The current incarnation.
    pub fn get(&self) -> Result<ActorRef<M>, Unavailable> {
        self.current
            .load()
            .as_deref()
            .cloned()
            .ok_or(Unavailable(self.name))
    }

    /// Sends `msg` to the current incarnation.
    pub fn cast(&self, msg: M) -> Result<(), Unavailable> {
        self.get()?.cast(msg).map_err(|_| Unavailable(self.name))
    }
}

/// The actor is down (failed and not yet restarted, or stopped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the {0} actor is not running (it failed and is being restarted, or the runtime is stopping)"
)]
pub struct Unavailable(pub &'static str);
