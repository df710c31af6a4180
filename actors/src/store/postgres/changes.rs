//! What other daemons change, as PostgreSQL tells it (LISTEN/NOTIFY): a run submitted, a run
//! finished, a message relayed. One connection of its own listens (a pooled one cannot: notifications come to
//! the connection that listens); it reconnects after a failure, and then says `Resync`, since
//! what was notified meanwhile is lost.

use super::relay::Inbox;
use crate::store::Change;
use futures_util::StreamExt;
use std::time::Duration;
use tokio::sync::broadcast;
use tokio_postgres::AsyncMessage;
use tokio_util::sync::CancellationToken;

/// How long the listener waits before connecting again.
const RECONNECT: Duration = Duration::from_secs(1);

/// Listens on the queue's channels until `stop`, sending what it hears to `changes`.
pub(super) fn spawn_listener(
    reach: super::Reach,
    changes: broadcast::Sender<Change>,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        let mut failing = false;
        // Kept across connections, so that a notification replayed meanwhile is refused.
        let mut inbox = Inbox::new();
        while !stop.is_cancelled() {
            let listened = tokio::select! {
                listened = listen(&reach, &changes, &mut inbox) => listened,
                () = stop.cancelled() => return,
            };
            if let Err(e) = listened {
                if !failing {
                    tracing::warn!("listening to the database for queue changes: {e}; retrying");
                }
                failing = true;
            }
            tokio::select! {
                () = tokio::time::sleep(RECONNECT) => {}
                () = stop.cancelled() => return,
            }
        }
    });
}

/// One connection's life: LISTEN, then every notification until the connection ends.
async fn listen(
    reach: &super::Reach,
    changes: &broadcast::Sender<Change>,
    inbox: &mut Inbox,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = reach.config.connect(reach.tls.clone()).await?;
    let (messages_tx, mut messages) = tokio::sync::mpsc::unbounded_channel();
    // The connection is driven by this task; its messages come out here.
    let pump = tokio::spawn(async move {
        let mut stream = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = stream.next().await {
            if messages_tx.send(message).is_err() {
                break;
            }
        }
    });
    client
        .batch_execute(&format!(
            "LISTEN ryvos_queue; LISTEN ryvos_runs; LISTEN {}",
            super::relay::CHANNEL
        ))
        .await?;
    tell(changes, Change::Resync);
    while let Some(message) = messages.recv().await {
        // Notices and other messages say nothing about the queue.
        let AsyncMessage::Notification(n) = message? else {
            continue;
        };
        let change = match n.channel() {
            "ryvos_queue" => Change::Queued,
            "ryvos_runs" => Change::Finished(crate::ids::QueuedRunId::new(n.payload())),
            _ => match inbox.open(&client, n.payload()).await? {
                Some(relay) => Change::Relay(relay),
                None => continue,
            },
        };
        tell(changes, change);
    }
    pump.abort();
    Ok(())
}

/// Passes `change` on. With no one subscribed (no queue worker, no waiter) there is no one to
/// tell, and nothing is lost: whoever subscribes later looks at the store first.
fn tell(changes: &broadcast::Sender<Change>, change: Change) {
    if changes.send(change).is_err() {
        tracing::trace!("a store change with no one listening");
    }
}
