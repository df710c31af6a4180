//! Messages between daemons: each is stored in the `relayed` table, and its id goes out over
//! NOTIFY on the `ryvos_relay` channel. Anyone who can connect may NOTIFY, so a notification
//! is only a pointer: the message is read from the table, where only a role that may write
//! Ryvos's tables can put one. A message is heard once, and only while it is fresh.

use super::{PgContext, PostgresStore};
use crate::store::{Relay, StoreError};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The channel relays travel on.
pub(super) const CHANNEL: &str = "ryvos_relay";

/// How long a message stays readable (and stored): a relay is answered within seconds.
const FRESH_SECS: f64 = 60.0;

/// The other daemons whose heartbeat is younger than a lease.
const PEERS: &str = "SELECT id FROM daemons \
    WHERE id <> $1 AND seen_at > now() - $2 * interval '1 millisecond' ORDER BY id";

/// Stores a message and tells its id to every listener, at the statement's end.
const SEND: &str = "WITH sent AS (INSERT INTO relayed (body) VALUES ($1) RETURNING id) \
    SELECT pg_notify($2, id::text) FROM sent";

/// Forgets the messages no one may read any more.
const PRUNE: &str = "DELETE FROM relayed WHERE sent_at < now() - $1 * interval '1 second'";

/// A fresh message by id.
const READ: &str =
    "SELECT body::text FROM relayed WHERE id = $1 AND sent_at > now() - $2 * interval '1 second'";

impl PostgresStore {
    pub(super) async fn live_peers(&self) -> Result<Vec<String>, StoreError> {
        let doing = || "listing the daemons sharing the store".to_string();
        let client = self.pool.get().await.pg(doing)?;
        let ttl = self.lease_ttl.as_millis() as f64;
        let rows = client.query(PEERS, &[&&*self.node, &ttl]).await.pg(doing)?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    pub(super) async fn notify(&self, relay: &Relay) -> Result<(), StoreError> {
        let doing = || "relaying a message to the other daemons".to_string();
        let body = tokio_postgres::types::Json(relay);
        let client = self.pool.get().await.pg(doing)?;
        client.execute(SEND, &[&body, &CHANNEL]).await.pg(doing)?;
        Ok(())
    }
}

/// Forgets the messages no one may read any more (a daemon's heartbeat does it).
pub(super) async fn prune(client: &tokio_postgres::Client) -> Result<u64, tokio_postgres::Error> {
    client.execute(PRUNE, &[&FRESH_SECS]).await
}

/// What a listener heard on [`CHANNEL`], read from the table. Only stored messages are
/// remembered (so that notifying ids ahead of time blocks nothing), and each for as long as it
/// is readable: a notification of one already heard is a replay.
pub(super) struct Inbox {
    heard: HashMap<i64, Instant>,
}

/// How long an inbox remembers a message it read: longer than the message stays readable.
const REMEMBERED: Duration = Duration::from_secs(2 * FRESH_SECS as u64);

impl Inbox {
    pub(super) fn new() -> Inbox {
        Inbox {
            heard: HashMap::new(),
        }
    }

    /// The message notification `payload` points at; `None` for one that names no fresh
    /// stored message, or one already heard.
    pub(super) async fn open(
        &mut self,
        client: &tokio_postgres::Client,
        payload: &str,
    ) -> Result<Option<Relay>, tokio_postgres::Error> {
        let Ok(id) = payload.parse::<i64>() else {
            tracing::warn!(
                "ignoring a notification on {CHANNEL} that names no message: {payload:.80}"
            );
            return Ok(None);
        };
        if self.heard.contains_key(&id) {
            tracing::warn!(id, "ignoring a relayed message heard before");
            return Ok(None);
        }
        let Some(row) = client.query_opt(READ, &[&id, &FRESH_SECS]).await? else {
            tracing::warn!(
                id,
                "ignoring a notification of a message that is not stored, or stale"
            );
            return Ok(None);
        };
        self.heard.retain(|_, at| at.elapsed() < REMEMBERED);
        self.heard.insert(id, Instant::now());
        let body: String = row.get(0);
        match serde_json::from_str(&body) {
            Ok(relay) => Ok(Some(relay)),
            Err(e) => {
                // From a daemon of another version: it cannot be acted on.
                tracing::warn!(id, "ignoring a relayed message that does not parse: {e}");
                Ok(None)
            }
        }
    }
}
