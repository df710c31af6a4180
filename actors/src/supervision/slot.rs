//! A stable address for an actor that may be restarted.
//!
//! Actors talk to their siblings through a [`ChildSlot`] rather than a bare `ActorRef`: when a
//! supervisor restarts a child it puts the new incarnation in the slot, and every holder reaches
//! it on the next send. Reading the slot is one atomic load, no lock.

use arc_swap::ArcSwapOption;
use ractor::rpc::CallResult;
use ractor::{ActorRef, RpcReplyPort};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long a message sent with [`ChildSlot::send`] waits for an actor being restarted.
pub(super) const RESTART_PATIENCE: Duration = Duration::from_secs(30);

/// The current incarnation of a supervised actor, if it is up.
pub(crate) struct ChildSlot<M: ractor::Message> {
    name: &'static str,
    current: Arc<ArcSwapOption<ActorRef<M>>>,
    /// Woken whenever a new incarnation is put in the slot, and when it closes.
    filled: Arc<Notify>,
    /// Set when the actor will not come back (the runtime stopped).
    closed: Arc<AtomicBool>,
}

impl<M: ractor::Message> Clone for ChildSlot<M> {
    fn clone(&self) -> Self {
        Self {
            name: self.name,
            current: self.current.clone(),
            filled: self.filled.clone(),
            closed: self.closed.clone(),
        }
    }
}

impl<M: ractor::Message> ChildSlot<M> {
    /// An empty slot for the actor called `name`.
    pub(crate) fn new(name: &'static str) -> Self {
        Self {
            name,
            current: Arc::new(ArcSwapOption::empty()),
            filled: Arc::new(Notify::new()),
            closed: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Puts a (re)started incarnation in the slot.
    pub(crate) fn set(&self, actor: ActorRef<M>) {
        self.current.store(Some(Arc::new(actor)));
        self.filled.notify_waiters();
    }

    /// Empties the slot: the actor is down.
    pub(crate) fn clear(&self) {
        self.current.store(None);
    }

    /// True while an incarnation is in the slot.
    pub(crate) fn is_filled(&self) -> bool {
        self.current.load().is_some()
    }

    /// Empties the slot for good: the actor will not be restarted.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.current.store(None);
        self.filled.notify_waiters();
    }

    /// The current incarnation.
    pub(crate) fn get(&self) -> Result<ActorRef<M>, Unavailable> {
        self.current
            .load()
            .as_deref()
            .cloned()
            .ok_or(Unavailable(self.name))
    }

    /// Sends `msg` to the current incarnation.
    pub(crate) fn cast(&self, msg: M) -> Result<(), Unavailable> {
        self.get()?.cast(msg).map_err(|_| Unavailable(self.name))
    }

    /// Sends `msg`, riding out a restart: while the actor is down the message waits (at most
    /// [`RESTART_PATIENCE`]) for its next incarnation. A message that cannot be delivered is
    /// dropped, which answers the callback it carries with its failure; so only for messages
    /// that carry one, and whose order against other messages does not matter.
    pub(crate) fn send(&self, msg: M) {
        let msg = match self.get() {
            Ok(actor) => match actor.cast(msg) {
                Ok(()) => return,
                Err(ractor::MessagingErr::SendErr(msg)) => msg,
                Err(_) => return,
            },
            Err(_) => msg,
        };
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let slot = self.clone();
        tokio::spawn(async move {
            let deadline = Instant::now() + RESTART_PATIENCE;
            let mut msg = msg;
            loop {
                let waiting = slot.filled.notified();
                tokio::pin!(waiting);
                // Registered before the slot is read, so a restart in between is not missed.
                waiting.as_mut().enable();
                if slot.closed.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(actor) = slot.get() {
                    match actor.cast(msg) {
                        Ok(()) => return,
                        Err(ractor::MessagingErr::SendErr(back)) => msg = back,
                        Err(_) => return,
                    }
                }
                if tokio::time::timeout_at(deadline, waiting).await.is_err() {
                    tracing::warn!(
                        actor = slot.name,
                        "a message waited {RESTART_PATIENCE:?} for its actor's restart and was dropped"
                    );
                    return;
                }
            }
        });
    }

    /// Asks the actor and waits for its answer, riding out a restart: while the actor is down
    /// (or dies before answering) the request is made again to its next incarnation, until
    /// `patience` has passed. Only for requests that are safe to repeat.
    pub(crate) async fn call<R: Send + 'static>(
        &self,
        request: impl Fn(RpcReplyPort<R>) -> M,
        patience: Duration,
    ) -> Result<R, Unavailable> {
        let deadline = Instant::now() + patience;
        loop {
            let waiting = self.filled.notified();
            tokio::pin!(waiting);
            // Registered before the slot is read, so a restart in between is not missed.
            waiting.as_mut().enable();
            if self.closed.load(Ordering::SeqCst) {
                return Err(Unavailable(self.name));
            }
            if let Ok(actor) = self.get() {
                let left = deadline.saturating_duration_since(Instant::now());
                match actor.call(&request, Some(left)).await {
                    Ok(CallResult::Success(answer)) => return Ok(answer),
                    Ok(CallResult::Timeout) => return Err(Unavailable(self.name)),
                    // The incarnation died with the request; its successor will be asked.
                    Ok(CallResult::SenderError) | Err(_) => {}
                }
                if self.get().is_ok_and(|now| now.get_id() != actor.get_id()) {
                    continue;
                }
            }
            if tokio::time::timeout_at(deadline, waiting).await.is_err() {
                return Err(Unavailable(self.name));
            }
        }
    }
}

/// The actor is down (failed and not yet restarted, or stopped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the {0} actor is not running (it failed and is being restarted, or the runtime is stopping)"
)]
pub(crate) struct Unavailable(pub &'static str);
