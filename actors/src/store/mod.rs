//! The store: the append-only history, turn checkpoints, runs and sessions, and everything
//! else that must survive a crash.
//!
//! The engine sees storage through [`Storage`], whose records are the protocol crate's plain
//! data and whose writes are typed [`Write`]s grouped in [`WriteBatch`]es. Writes come only from
//! the CheckpointActor's writer, which hands any number of sessions' batches to one
//! [`Storage::write`]: one transaction, one commit. Reads may come from anywhere. redb (one
//! embedded file, zero setup) is the default backend; PostgreSQL is the one many daemons share.

mod batch;
mod bm25;
mod copy;
#[cfg(test)]
mod credential_checks;
mod error;
mod postgres;
mod records;
mod redb;
mod relay;
pub mod repair;
mod terms;

#[cfg(feature = "testing")]
pub use self::redb::faults::fail_writes as fail_store_writes;
pub(crate) use self::redb::RedbStore;
pub use batch::{Write, WriteBatch};
pub use copy::{copy_store, Copied};
pub(crate) use error::Context;
pub use error::StoreError;
use postgres::PostgresStore;
pub use records::now_ms;
pub(crate) use records::{
    AuditRecord, Compaction, CostTotals, MemoryEntry, RunRecord, SessionRecord, TurnCheckpoint,
    VerdictRecord,
};
pub use relay::{Delivery, Relay};

use crate::ids::{QueuedRunId, RunId, SessionId};
use crate::message::Message;
use async_trait::async_trait;
use ryvos_protocol::event::RunOutcome;
use ryvos_protocol::records::{
    Credential, PendingApproval, PlanRecord, QueueState, QueuedRun, RunWatch,
};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

/// A message as stored: its place in the session and its token count.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredMessage {
    pub seq: u64,
    /// Its tokens, counted; 0 when it was stored uncounted (see [`crate::tokens`]).
    pub tokens: u32,
    pub message: Arc<Message>,
}

/// Everything stored about a session, as loaded to resume it.
#[derive(Debug, Default)]
pub struct SessionHistory {
    pub messages: Vec<StoredMessage>,
    /// The seq the next message will take (one past the last stored).
    pub next_seq: u64,
    pub record: Option<SessionRecord>,
    /// Where the context window starts, if the session was ever pruned.
    pub compaction: Option<Compaction>,
    /// Runs that never recorded an end: they were cut off by a crash.
    pub unfinished_runs: Vec<RunRecord>,
}

/// A daemon's hold on a session: while it lasts, no other daemon writes to the session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lease {
    /// Grows with every taking: the fence every write of the session is checked against.
    pub generation: u64,
    /// Another daemon may have written to the session since this one last held it: what
    /// this daemon remembers of it is stale.
    pub changed_hands: bool,
}

/// What another daemon changed in a store many daemons share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A run was submitted, or put back: there is work to claim.
    Queued,
    /// A queued run ended.
    Finished(QueuedRunId),
    /// Changes may have been missed (the store reconnected): look again.
    Resync,
    /// A message from another daemon.
    Relay(Relay),
}

/// What a store used by one daemon answers when asked to reach the others.
fn no_peers() -> StoreError {
    StoreError::from_cause(
        "relaying to the other daemons",
        "no other daemon shares this store (set [store] backend = \"postgres\" to share one)",
    )
}

/// What a store without a run queue answers when asked for it.
fn no_queue() -> StoreError {
    StoreError::from_cause(
        "using the run queue",
        "the queue lives in a store that daemons share: set [store] backend = \"postgres\" \
         (with the embedded store, use `ryvos run`)",
    )
}

/// The storage interface: what the engine keeps and reads back, whatever keeps it.
#[async_trait]
pub trait Storage: Send + Sync + 'static {
    /// The backend's name, for `ryvos status` and logs.
    fn backend(&self) -> &'static str;

    /// How the store's connections are secured, for a store reached over a network: whether
    /// they are encrypted and the server verified. `None` for a local file.
    fn security(&self) -> Option<String> {
        None
    }

    /// Why the store cannot write, while it cannot (an I/O error it is recovering from).
    fn fault(&self) -> Option<String> {
        None
    }

    /// Stores every batch in one transaction: all of them, or none.
    async fn write(&self, batches: &[WriteBatch]) -> Result<(), StoreError>;

    /// This daemon's name among the daemons sharing the store; `None` when it is the store's
    /// only user.
    fn node(&self) -> Option<&str> {
        None
    }

    /// Takes session `id` for this daemon, refused while another daemon holds it. A store with
    /// one user grants every lease.
    async fn lease(&self, _id: &SessionId) -> Result<Lease, StoreError> {
        Ok(Lease::default())
    }

    /// How many sessions this daemon holds leases on now.
    fn leases_held(&self) -> usize {
        0
    }

    /// Gives session `id` up: another daemon may take it at once.
    async fn release(&self, _id: &SessionId) -> Result<(), StoreError> {
        Ok(())
    }

    /// Puts `run` in the run queue.
    async fn submit_run(&self, _run: &QueuedRun) -> Result<(), StoreError> {
        Err(no_queue())
    }

    /// Claims up to `limit` runs for this daemon (queued ones, and ones whose daemon died),
    /// their sessions leased.
    async fn claim_runs(&self, _limit: usize) -> Result<Vec<QueuedRun>, StoreError> {
        Ok(Vec::new())
    }

    /// Puts run `id`, claimed by this daemon, back in the queue. A run that did not start
    /// (`started` false) gives its attempt back.
    async fn unclaim_run(&self, _id: &QueuedRunId, _started: bool) -> Result<(), StoreError> {
        Ok(())
    }

    /// Records how run `id` ended, if this daemon still owns it; whether it did.
    async fn finish_run(
        &self,
        _id: &QueuedRunId,
        _outcome: &RunOutcome,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }

    /// Finishes the queued run whose run (`outcome`'s) parked and has now ended; nothing when
    /// no queued run waits on it.
    async fn settle_parked_run(&self, _outcome: &RunOutcome) -> Result<(), StoreError> {
        Ok(())
    }

    /// The queue's runs (in `state`, when given), the most recently submitted first.
    async fn queued_runs(
        &self,
        _state: Option<QueueState>,
        _limit: u32,
    ) -> Result<Vec<QueuedRun>, StoreError> {
        Err(no_queue())
    }

    /// The queued run `id`, if there is one.
    async fn queued_run(&self, _id: &QueuedRunId) -> Result<Option<QueuedRun>, StoreError> {
        Err(no_queue())
    }

    /// How many runs wait in the queue; `None` without one.
    async fn queue_depth(&self) -> Result<Option<u64>, StoreError> {
        Ok(None)
    }

    /// The other daemons sharing the store that are alive (their heartbeat is fresh).
    async fn peers(&self) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }

    /// Sends `relay` to every daemon sharing the store (as [`Change::Relay`]).
    async fn relay(&self, _relay: &Relay) -> Result<(), StoreError> {
        Err(no_peers())
    }

    /// What other daemons change, as they change it; `None` where there are none.
    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<Change>> {
        None
    }

    /// Why session `id` may no longer be written by this daemon (another took it over), if
    /// so: its batches are refused alone, failing no other session's in the same commit.
    fn taken_over(&self, _id: &SessionId) -> Option<StoreError> {
        None
    }

    /// For each of `ids`, the highest seq a new message may take without leaving a hole: one
    /// past the last one stored, or the start of the context window if a compaction moved it
    /// further. Read from one snapshot.
    async fn next_seqs(&self, ids: &[SessionId]) -> Result<HashMap<SessionId, u64>, StoreError>;

    /// A session's whole history, record and unfinished runs. An unknown session loads empty.
    async fn load_session(&self, id: &SessionId) -> Result<SessionHistory, StoreError>;

    /// Like [`Self::load_session`], but only the messages of the context window (from the last
    /// compaction on): what a session needs to go on, read in time that does not grow with
    /// what was pruned.
    async fn load_session_window(&self, id: &SessionId) -> Result<SessionHistory, StoreError>;

    /// A session's record, if the session exists (without reading its history).
    async fn session_record(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError>;

    /// A session's runs, oldest first.
    async fn session_runs(&self, id: &SessionId) -> Result<Vec<RunRecord>, StoreError>;

    /// Every session's record.
    async fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError>;

    /// The turn checkpoints of a session, oldest first.
    async fn checkpoints(&self, id: &SessionId) -> Result<Vec<TurnCheckpoint>, StoreError>;

    /// The Director's plan of session `id`, if it ever had one.
    async fn plan(&self, id: &SessionId) -> Result<Option<PlanRecord>, StoreError>;

    /// The security gate's decisions in session `id`, in order.
    async fn audit(&self, id: &SessionId) -> Result<Vec<AuditRecord>, StoreError>;

    /// The approval requests kept while their runs are paused.
    async fn paused_approvals(&self) -> Result<Vec<PendingApproval>, StoreError>;

    /// What people approved "always", per session.
    async fn always_allowed(&self) -> Result<HashMap<SessionId, HashSet<String>>, StoreError>;

    /// The Judge's verdicts on a run, in order.
    async fn verdicts(&self, run: &RunId) -> Result<Vec<VerdictRecord>, StoreError>;

    /// The ledger's totals under `key`, if any were recorded.
    async fn cost_totals(&self, key: &str) -> Result<Option<CostTotals>, StoreError>;

    /// Every ledger key starting with `prefix`, with its totals, in key order.
    async fn cost_totals_with_prefix(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, CostTotals)>, StoreError>;

    /// What the Guardian recorded of run `run_id`, if anything.
    async fn guardian_watch(&self, run_id: &RunId) -> Result<Option<RunWatch>, StoreError>;

    /// How well each memory matches `query`'s words, 0–1, for the memories that match at all
    /// (the keyword half of memory search; each backend ranks with its own text search).
    async fn keyword_scores(&self, query: &str) -> Result<HashMap<String, f64>, StoreError>;

    /// Every memory that has a vector (vector search is brute force).
    async fn memories_with_vectors(&self) -> Result<Vec<MemoryEntry>, StoreError>;

    /// Every memory (to copy them).
    async fn memories(&self) -> Result<Vec<MemoryEntry>, StoreError>;

    /// The memory `id`, if it exists.
    async fn memory(&self, id: &str) -> Result<Option<MemoryEntry>, StoreError>;

    // Credentials are written where they are made, not through the CheckpointActor's writer:
    // they belong to no session, are rare, and a login must not wait on a group commit.

    /// The credential `id`, if there is one (expired or not: the caller judges).
    async fn credential(&self, id: &str) -> Result<Option<Credential>, StoreError>;

    /// Every credential whose id starts with `prefix`, in id order.
    async fn credentials(&self, prefix: &str) -> Result<Vec<Credential>, StoreError>;

    /// Stores `credential` unless an unexpired one holds its id (at `credential.created_ms`);
    /// whether it was stored. Daemons racing to add the same id: one wins.
    async fn add_credential(&self, credential: &Credential) -> Result<bool, StoreError>;

    /// Removes the credential `id`; whether there was one.
    async fn remove_credential(&self, id: &str) -> Result<bool, StoreError>;

    /// Removes every credential expired at `now_ms`; how many.
    async fn remove_expired_credentials(&self, now_ms: u64) -> Result<u64, StoreError>;
}

/// The store as the engine holds it: a cheap handle on one backend.
#[derive(Clone)]
pub struct Store(Arc<dyn Storage>);

impl Store {
    /// A handle on `backend`.
    pub fn new(backend: impl Storage) -> Self {
        Self(Arc::new(backend))
    }

    /// Opens (or creates) the embedded redb store at `path`. With `durable`, every commit is on
    /// disk when it returns; without, a crash may lose the latest commits.
    pub fn open(path: &Path, durable: bool) -> Result<Self, StoreError> {
        RedbStore::open(path, durable).map(Self::new)
    }

    /// Connects to the PostgreSQL database at `url` with up to `pool_size` connections, and
    /// brings its schema up to date; this daemon, `node`, holds leases for `lease_ttl` unless it
    /// renews them. With
    /// `durable`, every commit is on the server's disk when it returns.
    pub async fn connect(
        url: &str,
        pool_size: usize,
        durable: bool,
        lease_ttl: std::time::Duration,
        node: &str,
    ) -> Result<Self, StoreError> {
        PostgresStore::open(url, pool_size, durable, lease_ttl, node)
            .await
            .map(Self::new)
    }
}

impl std::ops::Deref for Store {
    type Target = dyn Storage;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}
