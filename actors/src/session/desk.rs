//! What of a session outlives its actor: the conversation between runs, and the run being
//! driven. The supervisor keeps each session's desk across its actor's restarts, so an actor
//! that fails loses nothing: the run in flight goes on (its driver is a task of its own), and
//! the next incarnation takes up where the last one was. Stops and interrupts reach the run
//! through the desk, so they work while the actor is being restarted.

use super::conversation::Conversation;
use super::driver::Control;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

/// Tells the session's actor that its run ended; false when that incarnation is gone.
pub(super) type TellRunEnded = Arc<dyn Fn() -> bool + Send + Sync>;

/// A session's desk; see the module documentation.
#[derive(Default)]
pub(super) struct Desk(Mutex<Held>);

#[derive(Default)]
struct Held {
    /// The conversation, while no run holds it.
    conversation: Option<Conversation>,
    /// The way to tell the run in flight, set as it is started (before its driver is up, so
    /// that a stop asked at once waits for it rather than being lost).
    control: Option<UnboundedSender<Control>>,
    /// The run in flight's driver.
    driving: Option<Driving>,
    /// How the actor's current incarnation is told that a run ended.
    actor: Option<TellRunEnded>,
}

/// A run's driver as its session holds it: its task (once spawned), stopped when the session
/// is given up.
pub(super) struct Driving {
    task: Option<tokio::task::JoinHandle<()>>,
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

    /// Takes up the desk for a new incarnation of the session's actor: a conversation left
    /// by one that failed between runs is read again (recovering `recover` if given), and
    /// without one or a run holding it, `new` makes one. One step under the lock, so a run
    /// ending meanwhile is not overwritten.
    pub(super) fn take_up(
        &self,
        recover: Option<(crate::ids::RunId, String)>,
        new: impl FnOnce(Option<(crate::ids::RunId, String)>) -> Conversation,
    ) {
        let mut guard = self.held();
        let held = &mut *guard;
        match (held.conversation.as_mut(), &held.driving) {
            (Some(conversation), _) => {
                conversation.needs_reload = true;
                if recover.is_some() {
                    conversation.recover = recover;
                }
            }
            (None, None) => held.conversation = Some(new(recover)),
            // The run in flight holds it, and gives it back when it ends.
            (None, Some(_)) => {}
        }
    }

    /// The conversation, for a run or a reload; `None` while a run holds it.
    pub(super) fn take_conversation(&self) -> Option<Conversation> {
        self.held().conversation.take()
    }

    pub(super) fn put_conversation(&self, conversation: Conversation) {
        self.held().conversation = Some(conversation);
    }

    /// A run is started on the session: what its driver will hear from.
    pub(super) fn run_starting(&self) -> UnboundedReceiver<Control> {
        let (control, controlled) = mpsc::unbounded_channel();
        self.held().control = Some(control);
        controlled
    }

    /// The run's driver is about to be spawned: from now on the session is driven.
    pub(super) fn driving(&self) {
        self.held().driving = Some(Driving { task: None });
    }

    /// The driver's task, kept to be stopped with the session, unless the run has already
    /// ended (its task is done).
    pub(super) fn spawned(&self, task: tokio::task::JoinHandle<()>) {
        if let Some(driving) = self.held().driving.as_mut() {
            driving.task = Some(task);
        }
    }

    /// Tells the run in flight; whether there is one.
    pub(super) fn control(&self, control: Control) -> bool {
        let held = self.held();
        held.control
            .as_ref()
            .is_some_and(|c| c.send(control).is_ok())
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
        held.control = None;
        if let Some(mut driving) = held.driving.take() {
            drop(driving.task.take());
        }
    }
}

/// A desk as a run's driver holds it: without keeping it (or the session) alive.
pub(super) type DeskRef = Weak<Desk>;
