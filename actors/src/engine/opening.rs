//! Opening the store the engine's config names.

use super::{EngineConfig, EngineError};
use crate::config::StoreBackend;
use crate::store::{Store, StoreError};
use std::time::Duration;

/// An actor-system failure while opening the store.
pub(super) fn opening_store(e: impl std::fmt::Display) -> EngineError {
    EngineError::Actors(format!("opening the store: {e}"))
}

/// The store `config` names: the redb file, or the PostgreSQL database.
pub(super) async fn open_store(config: &EngineConfig) -> Result<Store, EngineError> {
    let durable = config.agent.checkpoint.enabled;
    match config.store.backend {
        StoreBackend::Redb => {
            let database = config.database.clone();
            tokio::task::spawn_blocking(move || Store::open(&database, durable))
                .await
                .map_err(opening_store)?
                .map_err(EngineError::Store)
        }
        StoreBackend::Postgres => {
            let url = crate::config::expand_env(&config.store.url, "store.url")
                .map_err(|e| EngineError::Store(StoreError::from_cause("opening the store", e)))?;
            let lease = Duration::from_secs(config.store.lease_secs.max(1));
            let pool = config.store.pool_size;
            Ok(Store::connect(&url, pool, durable, lease, &config.node).await?)
        }
    }
}
