//! The event bus: a run's events go to its session's subscribers and to the process-wide stream.
//! The events themselves are plain data, in [`ryvos_protocol::event`].

pub(crate) use ryvos_protocol::event::*;

use crate::ids::{RunId, SessionId};
use crate::telemetry::{RunTrace, Telemetry, TraceParent};
use std::sync::Arc;
use tokio::sync::broadcast;

/// How many events a subscriber may fall behind before it starts missing the oldest ones. A slow
/// subscriber lags; it never blocks the run.
pub(crate) const EVENT_BUFFER: usize = 4096;

/// The process-wide stream every session also publishes to, and the telemetry that makes
/// spans of runs, when it is on.
#[derive(Clone)]
pub(crate) struct GlobalEvents {
    sender: broadcast::Sender<Arc<Event>>,
    telemetry: Option<Arc<Telemetry>>,
}

impl GlobalEvents {
    /// A new, empty global stream.
    pub(crate) fn new() -> Self {
        Self {
            sender: broadcast::channel(EVENT_BUFFER).0,
            telemetry: None,
        }
    }

    /// The same stream, its runs traced by `telemetry`.
    pub(crate) fn traced(self, telemetry: Option<Arc<Telemetry>>) -> Self {
        Self { telemetry, ..self }
    }

    /// Follows every event of every session from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.sender.subscribe()
    }
}

impl Default for GlobalEvents {
    fn default() -> Self {
        Self::new()
    }
}

/// One session's event stream.
///
/// Its buffer is made when a run or a subscriber first needs it and let go when the session's
/// run ends ([`SessionEvents::release`]): an idle session holds none. Publishers and
/// subscribers of the run that ended keep theirs until they are done with it.
#[derive(Clone)]
pub(crate) struct SessionEvents {
    session: Arc<std::sync::Mutex<Option<broadcast::Sender<Arc<Event>>>>>,
    global: GlobalEvents,
}

impl SessionEvents {
    /// A stream for one session that also feeds `global`.
    pub(crate) fn new(global: GlobalEvents) -> Self {
        Self {
            session: Arc::default(),
            global,
        }
    }

    fn sender(&self) -> broadcast::Sender<Arc<Event>> {
        let mut current = self.session.lock().unwrap_or_else(|e| e.into_inner());
        current
            .get_or_insert_with(|| broadcast::channel(EVENT_BUFFER).0)
            .clone()
    }

    /// Follows this session's events from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.sender().subscribe()
    }

    /// Lets go of the buffer: the session's run has ended. The next run or subscriber gets a
    /// new one.
    pub(crate) fn release(&self) {
        *self.session.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// A publisher stamping every event with this run's ids.
    pub(crate) fn for_run(&self, session_id: SessionId, run_id: RunId) -> RunEvents {
        self.for_run_under(session_id, run_id, None)
    }

    /// [`SessionEvents::for_run`], the run's span a child of `parent`'s.
    pub(crate) fn for_run_under(
        &self,
        session_id: SessionId,
        run_id: RunId,
        parent: Option<&TraceParent>,
    ) -> RunEvents {
        let trace = self.global.telemetry.as_ref().map(|telemetry| {
            let parent = parent.map(TraceParent::context);
            Arc::new(RunTrace::start(
                telemetry.clone(),
                &session_id,
                &run_id,
                parent,
            ))
        });
        RunEvents {
            session: self.sender(),
            global: self.global.clone(),
            session_id,
            run_id,
            trace,
        }
    }
}

/// Publishes the events of one run.
#[derive(Clone)]
pub(crate) struct RunEvents {
    session: broadcast::Sender<Arc<Event>>,
    global: GlobalEvents,
    session_id: SessionId,
    run_id: RunId,
    /// The run's spans, while telemetry is on.
    trace: Option<Arc<RunTrace>>,
}

impl RunEvents {
    /// The run's spans, while telemetry is on.
    pub(crate) fn trace(&self) -> Option<&RunTrace> {
        self.trace.as_deref()
    }

    /// The run these events are of.
    pub(crate) fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// Publishes `kind` to the session's subscribers and the global stream.
    pub(crate) fn emit(&self, kind: EventKind) {
        if let Some(trace) = &self.trace {
            trace.on_event(&kind);
        }
        let event = Arc::new(Event {
            session_id: self.session_id.clone(),
            run_id: self.run_id.clone(),
            kind,
        });
        // Having no subscriber is normal (a headless run); there is nothing to deliver then.
        self.global.sender.send(event.clone()).ok();
        self.session.send(event).ok();
    }

    /// The session these events belong to.
    pub(crate) fn session_id(&self) -> &SessionId {
        &self.session_id
    }
}
