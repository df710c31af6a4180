//! The embedded store: one redb file, zero setup. Reads may come from anywhere (redb serves
//! readers alongside the writer); writes come only from the CheckpointActor's writer thread,
//! which puts any number of sessions' batches in one transaction and one commit.

mod credentials;
#[cfg(feature = "testing")]
pub(super) mod faults;
mod file;
mod holder;
mod memory;
mod reads;
mod tables;
mod write;

use super::{Context, SessionHistory, Storage, StoreError, WriteBatch};
use crate::ids::{RunId, SessionId};
use async_trait::async_trait;
use file::DatabaseFile;
use redb::{Database, Durability, ReadableDatabase};
use ryvos_protocol::records::{
    AuditRecord, CostTotals, Credential, MemoryEntry, PendingApproval, PlanRecord, RunRecord,
    RunWatch, SessionRecord, TurnCheckpoint, VerdictRecord,
};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use tables::{
    ALWAYS, APPROVALS, AUDIT, CHECKPOINTS, COMPACTIONS, COSTS, CREDENTIALS, GUARDIAN, MEMORIES,
    MEMORY_STATS, MEMORY_TERMS, MESSAGES, PLANS, RUNS, SESSIONS, VERDICTS,
};

/// Every key of a session (or run) in a table keyed `(id, text)` sorts between these two.
const FIRST: &str = "";
const PAST_LAST: &str = "\u{10FFFF}";

/// The redb database. Reads that scan (a history, a list) run on tokio's blocking threads, so
/// a long one never holds up an async worker; a lookup of one key runs where it is called,
/// as it costs less than the hop. Writes run where they are called, on the writer thread.
#[derive(Clone)]
pub(crate) struct RedbStore {
    file: Arc<DatabaseFile>,
    durability: Durability,
}

impl RedbStore {
    /// Opens (or creates) the database at `path`. With `durable`, every commit is on disk when
    /// it returns; without, a crash may lose the latest commits.
    pub(crate) fn open(path: &Path, durable: bool) -> Result<RedbStore, StoreError> {
        let store = RedbStore {
            file: Arc::new(DatabaseFile::open(path)?),
            durability: if durable {
                Durability::Immediate
            } else {
                Durability::None
            },
        };
        store.create_tables()?;
        Ok(store)
    }

    fn create_tables(&self) -> Result<(), StoreError> {
        let doing = || "creating the tables".to_string();
        let txn = self.db()?.begin_write().doing(doing)?;
        MESSAGES.open(&txn, doing)?;
        CHECKPOINTS.open(&txn, doing)?;
        RUNS.open(&txn, doing)?;
        SESSIONS.open(&txn, doing)?;
        COSTS.open(&txn, doing)?;
        GUARDIAN.open(&txn, doing)?;
        COMPACTIONS.open(&txn, doing)?;
        MEMORIES.open(&txn, doing)?;
        MEMORY_STATS.open(&txn, doing)?;
        VERDICTS.open(&txn, doing)?;
        PLANS.open(&txn, doing)?;
        AUDIT.open(&txn, doing)?;
        APPROVALS.open(&txn, doing)?;
        CREDENTIALS.open(&txn, doing)?;
        txn.open_table(MEMORY_TERMS).doing(doing)?;
        txn.open_table(ALWAYS).doing(doing)?;
        txn.commit().doing(doing)
    }

    /// The database, opened again first if an I/O error closed it.
    fn db(&self) -> Result<Arc<Database>, StoreError> {
        self.file.get()
    }

    fn read(&self, doing: impl Fn() -> String) -> Result<redb::ReadTransaction, StoreError> {
        self.db()?.begin_read().doing(doing)
    }

    /// Stores `batches` in `db` in one transaction.
    fn write_to(&self, db: &Database, batches: &[WriteBatch]) -> Result<(), StoreError> {
        let doing = || format!("writing {} batch(es) to the store", batches.len());
        let mut txn = db.begin_write().doing(doing)?;
        txn.set_durability(self.durability).doing(doing)?;
        write::apply(&txn, batches)?;
        txn.commit().doing(doing)
    }

    /// Runs `read` on a blocking thread (inline when there is no runtime to lend one).
    async fn off_workers<T: Send + 'static>(
        &self,
        read: impl FnOnce(&RedbStore) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return read(self);
        }
        let store = self.clone();
        tokio::task::spawn_blocking(move || read(&store))
            .await
            .doing(|| "reading the store".to_string())?
    }
}

#[async_trait]
impl Storage for RedbStore {
    fn backend(&self) -> &'static str {
        "redb"
    }

    fn fault(&self) -> Option<String> {
        self.file.fault()
    }

    async fn write(&self, batches: &[WriteBatch]) -> Result<(), StoreError> {
        let db = self.db()?;
        let written = self.write_to(&db, batches);
        match &written {
            Ok(()) => self.file.write_succeeded(),
            Err(e) => self.file.write_failed(db, e),
        }
        written
    }

    async fn next_seqs(&self, ids: &[SessionId]) -> Result<HashMap<SessionId, u64>, StoreError> {
        self.read_next_seqs(ids)
    }

    async fn load_session(&self, id: &SessionId) -> Result<SessionHistory, StoreError> {
        let id = id.to_owned();
        self.off_workers(move |s| s.load(&id, false)).await
    }

    async fn load_session_window(&self, id: &SessionId) -> Result<SessionHistory, StoreError> {
        let id = id.to_owned();
        self.off_workers(move |s| s.load(&id, true)).await
    }

    async fn session_record(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError> {
        self.read_session_record(id)
    }

    async fn session_runs(&self, id: &SessionId) -> Result<Vec<RunRecord>, StoreError> {
        let id = id.to_owned();
        self.off_workers(move |s| s.read_session_runs(&id)).await
    }

    async fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        self.off_workers(move |s| s.read_sessions()).await
    }

    async fn checkpoints(&self, id: &SessionId) -> Result<Vec<TurnCheckpoint>, StoreError> {
        let id = id.to_owned();
        self.off_workers(move |s| s.read_checkpoints(&id)).await
    }

    async fn plan(&self, id: &SessionId) -> Result<Option<PlanRecord>, StoreError> {
        self.read_plan(id)
    }

    async fn audit(&self, id: &SessionId) -> Result<Vec<AuditRecord>, StoreError> {
        let id = id.to_owned();
        self.off_workers(move |s| s.read_audit(&id)).await
    }

    async fn paused_approvals(&self) -> Result<Vec<PendingApproval>, StoreError> {
        self.off_workers(move |s| s.read_paused_approvals()).await
    }

    async fn always_allowed(&self) -> Result<HashMap<SessionId, HashSet<String>>, StoreError> {
        self.off_workers(move |s| s.read_always_allowed()).await
    }

    async fn verdicts(&self, run: &RunId) -> Result<Vec<VerdictRecord>, StoreError> {
        let run = run.to_owned();
        self.off_workers(move |s| s.read_verdicts(&run)).await
    }

    async fn cost_totals(&self, key: &str) -> Result<Option<CostTotals>, StoreError> {
        self.read_cost_totals(key)
    }

    async fn cost_totals_with_prefix(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, CostTotals)>, StoreError> {
        let prefix = prefix.to_owned();
        self.off_workers(move |s| s.read_cost_totals_with_prefix(&prefix))
            .await
    }

    async fn guardian_watch(&self, run_id: &RunId) -> Result<Option<RunWatch>, StoreError> {
        self.read_guardian_watch(run_id)
    }

    async fn keyword_scores(&self, query: &str) -> Result<HashMap<String, f64>, StoreError> {
        let query = query.to_owned();
        self.off_workers(move |s| s.read_keyword_scores(&query))
            .await
    }

    async fn memories(&self) -> Result<Vec<MemoryEntry>, StoreError> {
        self.off_workers(move |s| s.read_memories()).await
    }

    async fn memories_with_vectors(&self) -> Result<Vec<MemoryEntry>, StoreError> {
        self.off_workers(move |s| s.read_memories_with_vectors())
            .await
    }

    async fn memory(&self, id: &str) -> Result<Option<MemoryEntry>, StoreError> {
        self.read_memory(id)
    }

    async fn credential(&self, id: &str) -> Result<Option<Credential>, StoreError> {
        self.read_credential(id)
    }

    async fn credentials(&self, prefix: &str) -> Result<Vec<Credential>, StoreError> {
        let prefix = prefix.to_owned();
        self.off_workers(move |s| s.read_credentials(&prefix)).await
    }

    async fn add_credential(&self, credential: &Credential) -> Result<bool, StoreError> {
        let credential = credential.clone();
        self.off_workers(move |s| s.write_new_credential(&credential))
            .await
    }

    async fn remove_credential(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.off_workers(move |s| s.delete_credential(&id)).await
    }

    async fn remove_expired_credentials(&self, now_ms: u64) -> Result<u64, StoreError> {
        self.off_workers(move |s| s.delete_expired_credentials(now_ms))
            .await
    }
}

#[cfg(test)]
mod tests;
