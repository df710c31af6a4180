//! What of a session outlives its actor: the conversation between runs, and the run being
//! driven. The supervisor keeps each session's desk across its actor's restarts, so an actor
//! that fails loses nothing: the run in flight goes on (its driver is a task of its own), and
//! the next incarnation takes up where the last one was. Stops and interrupts reach the run
//! through the desk, so they work while the actor is being restarted.

use super::conversation::Conversation;
use super::driver::Control;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Tells the session's actor that its run ended; false when that incarnation is gone.
pub(super) type TellRunEnded = Arc<dyn Fn() -> bool + Send + Sync>;

/// A session's desk; see the module documentation.
#[derive(Default)]
pub(super) struct Desk(Mutex<Held>);

#[derive(Default)]
struct Held {
    /// The conversation, while no run holds it.
    conversation: Option<Conversation>,
    /// The run in flight.
    driving: Option<Driving>,
    /// How the actor's current incarnation is told that a run ended.
    actor: Option<TellRunEnded>,
}

/// A run's driver as its session holds it: the way to tell it, and its task, stopped when the
/// session is given up.
pub(super) struct Driving {
    pub control: tokio::sync::mpsc::UnboundedSender<Control>,
    pub task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Driving {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Desk {
    pub(super) fn new() -> Arc<Desk> {
        Arc::default()
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        // Every change under the lock is a single assignment: a panic elsewhere cannot leave
        // it half made.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session's actor from now on is told through `actor`.
    pub(super) fn attach(&self, actor: TellRunEnded) {
        self.held().actor = Some(actor);
    }

    /// Whether a run is being driven.
    pub(super) fn is_driving(&self) -> bool {
        self.held().driving.is_some()
    }

    /// The conversation, for a run or a reload; `None` while a run holds it.
    pub(super) fn take_conversation(&self) -> Option<Conversation> {
        self.held().conversation.take()
    }

    pub(super) fn put_conversation(&self, conversation: Conversation) {
        self.held().conversation = Some(conversation);
    }

    /// A run's driver is started.
    pub(super) fn drive(&self, driving: Driving) {
        self.held().driving = Some(driving);
    }

    /// Tells the run in flight; whether there is one.
    pub(super) fn control(&self, control: Control) -> bool {
        let held = self.held();
        let Some(driving) = &held.driving else {
            return false;
        };
        driving.control.send(control).is_ok()
    }

    /// The run's driver ended and gave `conversation` back; the incarnation to tell, if one
    /// is up.
    pub(super) fn ended(&self, conversation: Conversation) -> Option<TellRunEnded> {
        let mut held = self.held();
        held.conversation = Some(conversation);
        Self::let_go(&mut held);
        held.actor.clone()
    }

    /// The run's driver failed; the conversation was lost with it.
    pub(super) fn driver_failed(&self) {
        Self::let_go(&mut self.held());
    }

    /// Forgets the driver without stopping its task (it is the one ending).
    fn let_go(held: &mut Held) {
        if let Some(mut driving) = held.driving.take() {
            drop(driving.task.take());
        }
    }
}

/// A desk as a run's driver holds it: without keeping it (or the session) alive.
pub(super) type DeskRef = Weak<Desk>;
