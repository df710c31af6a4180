//! `[store]`: which backend keeps what must survive a crash.

use serde::{Deserialize, Serialize};

/// The storage backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreBackend {
    /// One embedded file, `$RYVOS_HOME/ryvos.redb`: one machine, zero setup.
    #[default]
    Redb,
    /// A PostgreSQL database that many daemons share.
    Postgres,
}

/// `[store]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    pub backend: StoreBackend,
    /// For `postgres`: the connection string (`postgres://user:pass@host:port/db`, or the
    /// `key=value` form); `${VAR}` is expanded where the store is opened.
    pub url: String,
    /// For `postgres`: the most connections this process holds.
    #[serde(deserialize_with = "super::checked::positive")]
    pub pool_size: usize,
    /// For `postgres`: how long a daemon's hold on a session lasts unless renewed; a daemon
    /// that died is taken over after this.
    #[serde(deserialize_with = "super::checked::positive")]
    pub lease_secs: u64,
    /// For `postgres`: how many times a queued run is started before it is failed (each
    /// daemon that took it died, stopped, or lost the database): a run that crashes every
    /// daemon that runs it must not go round the cluster forever.
    #[serde(deserialize_with = "super::checked::positive")]
    pub max_attempts: u32,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            backend: StoreBackend::Redb,
            url: "${RYVOS_DATABASE_URL}".into(),
            pool_size: 16,
            lease_secs: 30,
            max_attempts: 10,
        }
    }
}
