//! The storage backends end-to-end tests run against: the embedded redb file, and a real
//! PostgreSQL server that the tests start themselves.

/// Where a test's Ryvos keeps its records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Redb,
    Postgres,
}

impl Backend {
    /// The `[store]` section for this backend: nothing for redb (the default); a new database
    /// of the test server for PostgreSQL.
    pub fn section(self) -> String {
        match self {
            Backend::Redb => String::new(),
            Backend::Postgres => {
                let url = database();
                format!("\n[store]\nbackend = \"postgres\"\nurl = \"{url}\"\npool_size = 4\n")
            }
        }
    }

    /// `config` on this backend, as [`Backend::section`] sets it.
    pub fn configure(self, config: &mut ryvos::Config) {
        if self == Backend::Postgres {
            config.store.backend = ryvos::config::StoreBackend::Postgres;
            config.store.url = database();
            config.store.pool_size = 4;
        }
    }

    /// Whether this backend can be tested here (PostgreSQL's absence is said on stderr).
    pub fn available(self) -> bool {
        self == Backend::Redb || ryvos_testkit::postgres::shared().is_some()
    }
}

/// A new database of the test PostgreSQL server: its URL.
fn database() -> String {
    let server = ryvos_testkit::postgres::shared()
        .expect("the PostgreSQL tests skip before they ask for a database");
    server.database().unwrap()
}

/// A test run once per backend: `async fn name(backend: Backend) { … }` becomes a module
/// `name` with the tests `redb` and `postgres`.
#[macro_export]
macro_rules! on_both_backends {
    ($(#[$meta:meta])* async fn $name:ident($backend:ident: Backend) $body:block) => {
        $(#[$meta])*
        mod $name {
            use super::*;

            async fn test($backend: $crate::common::backend::Backend) $body

            #[tokio::test(flavor = "multi_thread")]
            async fn redb() {
                test($crate::common::backend::Backend::Redb).await
            }

            #[tokio::test(flavor = "multi_thread")]
            async fn postgres() {
                if $crate::common::backend::Backend::Postgres.available() {
                    test($crate::common::backend::Backend::Postgres).await
                }
            }
        }
    };
}
