//! A run in flight, as the caller follows it: a stream of its events and its outcome.

use super::RuntimeError;
use futures_util::{Stream, StreamExt};
use ryvos_protocol::event::{Event, EventKind, RunOutcome};
use ryvos_protocol::ids::{RunId, SessionId};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::BroadcastStream;

/// What a [`RunHandle`] yields, as a [`Stream`].
#[derive(Clone, Debug)]
pub enum RunUpdate {
    /// The run's next event; `RunComplete` is the last.
    Event(Arc<Event>),
    /// The reader fell behind the event buffer and missed this many events (counted over
    /// every run's events); the run itself goes on.
    Lagged(u64),
}

/// A run in flight: a [`Stream`] of its events (ending after `RunComplete`), or wait for its
/// [`RunOutcome`] with [`RunHandle::outcome`].
pub struct RunHandle {
    pub session_id: SessionId,
    pub run_id: RunId,
    pub(super) events: BroadcastStream<Arc<Event>>,
    pub(super) ended: bool,
}

impl Stream for RunHandle {
    type Item = RunUpdate;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<RunUpdate>> {
        if self.ended {
            return Poll::Ready(None);
        }
        loop {
            let update = match self.events.poll_next_unpin(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => None,
                Poll::Ready(Some(Ok(event))) if event.run_id != self.run_id => continue,
                Poll::Ready(Some(Ok(event))) => Some(RunUpdate::Event(event)),
                Poll::Ready(Some(Err(BroadcastStreamRecvError::Lagged(n)))) => {
                    Some(RunUpdate::Lagged(n))
                }
            };
            self.ended = match &update {
                None => true,
                Some(RunUpdate::Event(event)) => {
                    matches!(event.kind, EventKind::RunComplete { .. })
                }
                Some(RunUpdate::Lagged(_)) => false,
            };
            return Poll::Ready(update);
        }
    }
}

impl RunHandle {
    /// Follows the run `ticket` started, from its first event.
    pub(super) fn of(ticket: ryvos_actors::RunTicket) -> Self {
        Self::following(ticket.session_id, ticket.run_id, ticket.events)
    }

    /// Follows run `run_id` of `session_id` on `events` (of its session, or of every run).
    pub(super) fn following(
        session_id: SessionId,
        run_id: RunId,
        events: tokio::sync::broadcast::Receiver<Arc<Event>>,
    ) -> Self {
        Self {
            session_id,
            run_id,
            events: BroadcastStream::new(events),
            ended: false,
        }
    }

    /// The run's next event; `None` after `RunComplete`. Events missed by falling behind are
    /// skipped (with a warning in the log); see the [`Stream`] for them as items.
    pub async fn next_event(&mut self) -> Option<Arc<Event>> {
        loop {
            match self.next().await? {
                RunUpdate::Event(event) => return Some(event),
                RunUpdate::Lagged(n) => {
                    tracing::warn!(run = %self.run_id, "a run's reader fell behind and missed {n} events");
                }
            }
        }
    }

    /// Waits for the run to end.
    pub async fn outcome(mut self) -> Result<RunOutcome, RuntimeError> {
        while let Some(event) = self.next_event().await {
            if let Some(outcome) = RunOutcome::from_event(&event) {
                return Ok(outcome);
            }
        }
        Err(RuntimeError::RunLost)
    }
}
