//! Writing reply lines to a client.

use ryvos::protocol::Reply;
use ryvos_protocol::event::Event;
use serde::Serialize;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;

/// How long one line may take to reach a client; a client that stops reading is dropped
/// (its runs go on) rather than holding a connection slot forever.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Writes `reply` as one line.
pub(super) async fn send(write: &mut OwnedWriteHalf, reply: &Reply) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(reply).map_err(std::io::Error::other)?;
    line.push(b'\n');
    write_within_timeout(write, &line).await
}

/// Writes `bytes`, giving up after [`WRITE_TIMEOUT`].
async fn write_within_timeout(write: &mut OwnedWriteHalf, bytes: &[u8]) -> std::io::Result<()> {
    tokio::time::timeout(WRITE_TIMEOUT, write.write_all(bytes))
        .await
        .map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, "the client stopped reading")
        })?
}

/// The most of a burst of events written at once: past it, what is encoded goes out before
/// the next ready event is taken, so a fast stream of deltas reaches the client as it comes.
const MAX_BURST_BYTES: usize = 64 * 1024;

/// A run's events on their way to a client, as `Reply::Event` lines. Events that are ready
/// together go out in one write (one system call, and one wake-up of the client, per burst
/// rather than per event), each encoded from the run's shared event, not from a copy of it.
pub(super) struct EventLines {
    id: u64,
    buffer: Vec<u8>,
    /// Turns told already (from the store, as a follower attached): their `CheckpointSaved`
    /// is not told again when it comes live too.
    told: std::collections::HashSet<(ryvos_protocol::ids::RunId, u32)>,
}

/// `Reply::Event`, borrowing its event.
#[derive(Serialize)]
struct EventLine<'a> {
    id: u64,
    event: &'a Event,
}

impl EventLines {
    /// Lines answering request `id`.
    pub(super) fn new(id: u64) -> Self {
        Self {
            id,
            buffer: Vec::new(),
            told: Default::default(),
        }
    }

    /// Notes that turn `turn` of `run` was told (its `CheckpointSaved` sent by other means).
    pub(super) fn told(&mut self, run: ryvos_protocol::ids::RunId, turn: u32) {
        self.told.insert((run, turn));
    }

    /// Adds `event`'s line to the burst.
    pub(super) fn push(&mut self, event: &Event) -> std::io::Result<()> {
        if let ryvos_protocol::event::EventKind::CheckpointSaved { turn } = &event.kind {
            if self.told.remove(&(event.run_id.clone(), *turn)) {
                return Ok(());
            }
        }
        let line = EventLine { id: self.id, event };
        serde_json::to_writer(&mut self.buffer, &line).map_err(std::io::Error::other)?;
        self.buffer.push(b'\n');
        Ok(())
    }

    /// Whether the burst should go out before another event joins it.
    pub(super) fn full(&self) -> bool {
        self.buffer.len() >= MAX_BURST_BYTES
    }

    /// Writes the burst, as [`send`] writes a line.
    pub(super) async fn flush(&mut self, write: &mut OwnedWriteHalf) -> std::io::Result<()> {
        let written = write_within_timeout(write, &self.buffer).await;
        self.buffer.clear();
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ryvos_protocol::event::EventKind;
    use ryvos_protocol::ids::{RunId, SessionId};

    #[test]
    fn an_event_line_is_the_event_reply_line() {
        let event = Event {
            session_id: SessionId::new("s_1"),
            run_id: RunId::new("r_1"),
            kind: EventKind::TextDelta {
                text: "a \"quoted\" line\n".into(),
            },
        };
        let mut lines = EventLines::new(7);
        lines.push(&event).unwrap();
        lines.push(&event).unwrap();
        let reply = Reply::Event { id: 7, event };
        let line = serde_json::to_string(&reply).unwrap() + "\n";
        assert_eq!(String::from_utf8(lines.buffer).unwrap(), line.repeat(2));
    }
}
