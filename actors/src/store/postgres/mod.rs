//! The shared store: a PostgreSQL database that many daemons use at once.
//!
//! The client is `tokio-postgres` (the rust-postgres project's async client: it pipelines the
//! statements of a transaction, and its connections carry LISTEN/NOTIFY) behind a small
//! `deadpool` pool. Queries are plain SQL, prepared once per connection; nothing needs a
//! database at build time. Every wait is bounded: connecting, waiting for a pooled
//! connection, and each statement.

mod changes;
mod credentials;
mod leases;
mod queue;
mod reads;
mod relay;
mod schema;
mod tls;
mod write;

use super::{Change, Lease, Relay, SessionHistory, Storage, StoreError, WriteBatch};
use crate::ids::{QueuedRunId, RunId, SessionId};
use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use ryvos_protocol::event::RunOutcome;
use ryvos_protocol::records::{
    AuditRecord, CostTotals, Credential, MemoryEntry, PendingApproval, PlanRecord, RunRecord,
    RunWatch, SessionRecord, TurnCheckpoint, VerdictRecord,
};
use ryvos_protocol::records::{QueueState, QueuedRun};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast;
use tokio_util::sync::{CancellationToken, DropGuard};

/// The pool of connections.
pub(super) type Pg = Pool;

/// The longest a connection attempt, or a wait for a free pooled connection, lasts.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest one statement runs before the server cancels it.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(60);

/// A PostgreSQL database.
#[derive(Clone)]
pub(crate) struct PostgresStore {
    pool: Pg,
    /// Whether a commit waits for the server's WAL flush (`synchronous_commit`).
    durable: bool,
    /// Why the last write failed to reach the server, until one succeeds.
    fault: Arc<Mutex<Option<String>>>,
    /// This daemon's name among those sharing the database.
    node: Arc<str>,
    /// How long a lease lasts unless renewed.
    lease_ttl: Duration,
    /// The sessions this daemon leased.
    leases: Arc<leases::Leases>,
    /// What other daemons change, as the listener hears it.
    changes: broadcast::Sender<Change>,
    /// The database's schema version, as the heartbeat reads it.
    schema: Arc<schema::Watch>,
    /// Whether its connections are encrypted and the server verified, as the server said.
    security: Arc<str>,
    /// Stops the listener when the last handle on the store is dropped.
    _listening: Arc<DropGuard>,
}

impl PostgresStore {
    /// Connects to the database at `url` with up to `pool_size` connections and brings its
    /// schema up to date; this daemon, `node`, holds leases for `lease_ttl` unless it renews
    /// them. With `durable`, every commit
    /// is on the server's disk when it returns.
    pub(crate) async fn open(
        url: &str,
        pool_size: usize,
        durable: bool,
        lease_ttl: Duration,
        node: &str,
    ) -> Result<PostgresStore, StoreError> {
        let (reach, pool) = pool(url, pool_size)?;
        let stop = CancellationToken::new();
        let changes = broadcast::channel(1024).0;
        let store = PostgresStore {
            pool,
            durable,
            fault: Arc::default(),
            node: node.into(),
            lease_ttl,
            leases: Arc::default(),
            changes: changes.clone(),
            schema: Arc::default(),
            security: "".into(),
            _listening: Arc::new(stop.clone().drop_guard()),
        };
        schema::migrate(&store.pool).await?;
        let secured = security(&store.pool, &reach.settings).await?;
        let store = PostgresStore {
            security: secured.into(),
            ..store
        };
        store.requeue_orphans().await?;
        changes::spawn_listener(reach, changes, stop);
        let keeper = leases::Keeper {
            pool: store.pool.clone(),
            node: store.node.clone(),
            ttl: lease_ttl,
            schema: store.schema.clone(),
        };
        keeper.spawn(Arc::downgrade(&store.leases));
        Ok(store)
    }

    /// The database's schema version.
    #[cfg(test)]
    pub(crate) async fn schema_version(&self) -> Result<i32, StoreError> {
        schema::version(&self.pool).await
    }
}

/// How the store reaches the server: its connections' settings and their TLS.
#[derive(Clone)]
pub(super) struct Reach {
    pub config: tokio_postgres::Config,
    pub tls: tokio_postgres_rustls::MakeRustlsConnect,
    pub settings: tls::TlsSettings,
}

/// The pool for `url` (and how its connections reach the server): connections made lazily,
/// each with a connect and a statement timeout, over TLS as `sslmode` says.
fn pool(url: &str, size: usize) -> Result<(Reach, Pg), StoreError> {
    let doing = || "opening the PostgreSQL store".to_string();
    let refused = |why: String| StoreError::from_cause(doing(), format!("[store] url: {why}"));
    let (url, settings) = tls::split_url(url).map_err(refused)?;
    let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
        StoreError::from_cause(
            doing(),
            format!(
                "[store] url is not a PostgreSQL connection string ({}); write it as \
                 postgres://user:password@host:port/database",
                described(&e)
            ),
        )
    })?;
    config.ssl_mode(settings.driver_mode());
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("ryvos");
    }
    let options = format!(
        "{} -c statement_timeout={}",
        config.get_options().unwrap_or_default(),
        STATEMENT_TIMEOUT.as_millis()
    );
    config.options(options.trim());
    let tls = tls::connector(&settings).map_err(refused)?;
    let manager = Manager::from_config(
        config.clone(),
        tls.clone(),
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let pool = Pool::builder(manager)
        .max_size(size.max(1))
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(CONNECT_TIMEOUT))
        .create_timeout(Some(CONNECT_TIMEOUT))
        .recycle_timeout(Some(CONNECT_TIMEOUT))
        .build()
        .map_err(|e| StoreError::from_cause(doing(), e))?;
    let reach = Reach {
        config,
        tls,
        settings,
    };
    Ok((reach, pool))
}

/// Whether the store's connections are encrypted, and how the server was checked: asked of the
/// server (`pg_stat_ssl`), so `prefer` says what it came to.
async fn security(pool: &Pg, settings: &tls::TlsSettings) -> Result<String, StoreError> {
    let doing = || "asking the server how the connection is secured".to_string();
    let client = pool.get().await.pg(doing)?;
    let row = client
        .query_opt(
            "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .pg(doing)?;
    let encrypted = row.as_ref().is_some_and(|r| r.get::<_, bool>(0));
    let mode = settings.mode.name();
    Ok(match (encrypted, settings.mode) {
        (false, _) => format!("not encrypted (sslmode={mode})"),
        (true, tls::SslMode::VerifyFull) => {
            format!("encrypted, the server's certificate and name verified (sslmode={mode})")
        }
        (true, _) if settings.verifies_chain() => format!(
            "encrypted, the server's certificate verified but not its name (sslmode={mode})"
        ),
        (true, _) => format!("encrypted, the server not verified (sslmode={mode})"),
    })
}

/// An error and its causes, in one line: tokio-postgres says "db error" and keeps the server's
/// message in its source.
pub(super) fn described(e: &(dyn std::error::Error + 'static)) -> String {
    // The pool's own words ("Error occurred while creating a new object") say less than what
    // went wrong connecting.
    if let Some(deadpool_postgres::PoolError::Backend(cause)) = e.downcast_ref() {
        return described(cause);
    }
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    text.replace('\n', " ")
}

/// Names what was being done when a database step failed, with the server's own message.
pub(super) trait PgContext<T> {
    fn pg(self, doing: impl FnOnce() -> String) -> Result<T, StoreError>;
}

impl<T, E: std::error::Error + 'static> PgContext<T> for Result<T, E> {
    fn pg(self, doing: impl FnOnce() -> String) -> Result<T, StoreError> {
        self.map_err(|e| StoreError::from_cause(doing(), described(&e)))
    }
}

#[async_trait]
impl Storage for PostgresStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn security(&self) -> Option<String> {
        Some(self.security.to_string())
    }

    fn fault(&self) -> Option<String> {
        let failed = self.fault.lock().unwrap_or_else(|e| e.into_inner()).clone();
        failed.or_else(|| self.schema.refusal())
    }

    fn node(&self) -> Option<&str> {
        Some(&self.node)
    }

    async fn lease(&self, id: &SessionId) -> Result<Lease, StoreError> {
        self.take_lease(id).await
    }

    fn leases_held(&self) -> usize {
        self.leases.live()
    }

    async fn release(&self, id: &SessionId) -> Result<(), StoreError> {
        self.let_go(id).await
    }

    async fn submit_run(&self, run: &QueuedRun) -> Result<(), StoreError> {
        self.enqueue(run).await
    }

    async fn claim_runs(&self, limit: usize) -> Result<Vec<QueuedRun>, StoreError> {
        self.claim(limit).await
    }

    async fn unclaim_run(&self, id: &QueuedRunId, started: bool) -> Result<(), StoreError> {
        self.unclaim(id, started).await
    }

    async fn finish_run(&self, id: &QueuedRunId, outcome: &RunOutcome) -> Result<bool, StoreError> {
        self.finish(id, outcome).await
    }

    async fn settle_parked_run(&self, outcome: &RunOutcome) -> Result<(), StoreError> {
        self.settle_parked(outcome).await
    }

    async fn queued_runs(
        &self,
        state: Option<QueueState>,
        limit: u32,
    ) -> Result<Vec<QueuedRun>, StoreError> {
        self.list_queue(state, limit).await
    }

    async fn queued_run(&self, id: &QueuedRunId) -> Result<Option<QueuedRun>, StoreError> {
        self.find_queued(id).await
    }

    async fn queue_depth(&self) -> Result<Option<u64>, StoreError> {
        self.depth().await.map(Some)
    }

    async fn peers(&self) -> Result<Vec<String>, StoreError> {
        self.live_peers().await
    }

    async fn relay(&self, relay: &Relay) -> Result<(), StoreError> {
        self.notify(relay).await
    }

    fn changes(&self) -> Option<broadcast::Receiver<Change>> {
        Some(self.changes.subscribe())
    }

    fn taken_over(&self, id: &SessionId) -> Option<StoreError> {
        self.leases.is_lost(id).then(|| leases::taken_over(id))
    }

    async fn write(&self, batches: &[WriteBatch]) -> Result<(), StoreError> {
        let written = self.write_batches(batches).await;
        *self.fault.lock().unwrap_or_else(|e| e.into_inner()) =
            written.as_ref().err().map(|e| e.to_string());
        written
    }

    async fn next_seqs(&self, ids: &[SessionId]) -> Result<HashMap<SessionId, u64>, StoreError> {
        self.read_next_seqs(ids).await
    }

    async fn load_session(&self, id: &SessionId) -> Result<SessionHistory, StoreError> {
        self.load(id, false).await
    }

    async fn load_session_window(&self, id: &SessionId) -> Result<SessionHistory, StoreError> {
        self.load(id, true).await
    }

    async fn session_record(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError> {
        self.read_session_record(id).await
    }

    async fn session_runs(&self, id: &SessionId) -> Result<Vec<RunRecord>, StoreError> {
        self.read_session_runs(id).await
    }

    async fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        self.read_sessions().await
    }

    async fn checkpoints(&self, id: &SessionId) -> Result<Vec<TurnCheckpoint>, StoreError> {
        self.read_checkpoints(id).await
    }

    async fn plan(&self, id: &SessionId) -> Result<Option<PlanRecord>, StoreError> {
        self.read_plan(id).await
    }

    async fn audit(&self, id: &SessionId) -> Result<Vec<AuditRecord>, StoreError> {
        self.read_audit(id).await
    }

    async fn paused_approvals(&self) -> Result<Vec<PendingApproval>, StoreError> {
        self.read_paused_approvals().await
    }

    async fn always_allowed(&self) -> Result<HashMap<SessionId, HashSet<String>>, StoreError> {
        self.read_always_allowed().await
    }

    async fn verdicts(&self, run: &RunId) -> Result<Vec<VerdictRecord>, StoreError> {
        self.read_verdicts(run).await
    }

    async fn cost_totals(&self, key: &str) -> Result<Option<CostTotals>, StoreError> {
        self.read_cost_totals(key).await
    }

    async fn cost_totals_with_prefix(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, CostTotals)>, StoreError> {
        self.read_cost_totals_with_prefix(prefix).await
    }

    async fn guardian_watch(&self, run_id: &RunId) -> Result<Option<RunWatch>, StoreError> {
        self.read_guardian_watch(run_id).await
    }

    async fn keyword_scores(&self, query: &str) -> Result<HashMap<String, f64>, StoreError> {
        self.read_keyword_scores(query).await
    }

    async fn memories_with_vectors(&self) -> Result<Vec<MemoryEntry>, StoreError> {
        self.read_memories_with_vectors().await
    }

    async fn memories(&self) -> Result<Vec<MemoryEntry>, StoreError> {
        self.read_memories().await
    }

    async fn memory(&self, id: &str) -> Result<Option<MemoryEntry>, StoreError> {
        self.read_memory(id).await
    }

    async fn credential(&self, id: &str) -> Result<Option<Credential>, StoreError> {
        self.read_credential(id).await
    }

    async fn credentials(&self, prefix: &str) -> Result<Vec<Credential>, StoreError> {
        self.read_credentials(prefix).await
    }

    async fn add_credential(&self, credential: &Credential) -> Result<bool, StoreError> {
        self.write_new_credential(credential).await
    }

    async fn remove_credential(&self, id: &str) -> Result<bool, StoreError> {
        self.delete_credential(id).await
    }

    async fn remove_expired_credentials(&self, now_ms: u64) -> Result<u64, StoreError> {
        self.delete_expired_credentials(now_ms).await
    }
}

#[cfg(test)]
mod tests;
