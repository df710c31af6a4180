//! `ryvos store copy URL`: this home's redb records into an empty PostgreSQL database, the
//! move from one machine to daemons sharing a database.

use crate::exit::{EXIT_RUN_FAILED, EXIT_USAGE};
use crate::out::outln;
use ryvos::config::{Config, StoreBackend};
use ryvos_client::Client;
use std::path::Path;

pub async fn copy(url: &str, config: &Config, socket: &Path) -> u8 {
    if config.store.backend == StoreBackend::Postgres {
        eprintln!(
            "ryvos: this home's store is PostgreSQL already ([store] backend): there is no redb \
             file to copy"
        );
        return EXIT_USAGE;
    }
    if Client::connect(socket).await.is_ok() {
        eprintln!(
            "ryvos: a daemon is running on this home and holds its store: stop it first \
             (`ryvos shutdown`), then copy"
        );
        return EXIT_RUN_FAILED;
    }
    let path = config.database_path();
    if !path.exists() {
        eprintln!(
            "ryvos: there is nothing to copy: no store at {}",
            path.display()
        );
        return EXIT_RUN_FAILED;
    }
    match ryvos::shared_store::copy_into_postgres(&path, url).await {
        Ok(c) => {
            outln!(
                "copied {} session(s) ({} messages, {} runs) and {} memories into the database; \
                 set [store] backend = \"postgres\" and url to use it",
                c.sessions,
                c.messages,
                c.runs,
                c.memories
            );
            0
        }
        Err(e) => {
            eprintln!("ryvos: {e}");
            EXIT_RUN_FAILED
        }
    }
}
