//! Messages between daemons over NOTIFY on the `ryvos_relay` channel, and who is alive to hear
//! them.

use super::{PgContext, PostgresStore};
use crate::store::{Relay, StoreError};

/// The channel relays travel on.
pub(super) const CHANNEL: &str = "ryvos_relay";

/// The other daemons whose heartbeat is younger than a lease.
const PEERS: &str = "SELECT id FROM daemons \
    WHERE id <> $1 AND seen_at > now() - $2 * interval '1 millisecond' ORDER BY id";

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
        let payload = serde_json::to_string(relay).pg(doing)?;
        let client = self.pool.get().await.pg(doing)?;
        client
            .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload])
            .await
            .pg(doing)?;
        Ok(())
    }
}
