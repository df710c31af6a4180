//! The redb store: append-only history, turn checkpoints, runs and sessions.
//!
//! Reads may come from anywhere (redb serves readers alongside the writer); writes come only
//! from the CheckpointActor's writer thread, through [`Store::write`], which puts any number of
//! sessions' batches in one transaction and one commit.

mod memory;
pub use memory::KeywordIndex;
mod records;
pub mod repair;
mod tables;

pub use records::{
    now_ms, AuditRecord, Compaction, CostTotals, MemoryEntry, RunRecord, SessionRecord,
    TurnCheckpoint, VerdictRecord,
};

use crate::guardian::RunWatch;
use crate::ids::{RunId, SessionId};
use crate::message::Message;
use redb::{Database, Durability, ReadableDatabase, ReadableTable};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use tables::{
    ALWAYS, APPROVALS, AUDIT, CHECKPOINTS, COMPACTIONS, COSTS, GUARDIAN, MEMORIES, MEMORY_STATS,
    MEMORY_TERMS, MESSAGES, PLANS, RUNS, SESSIONS, VERDICTS,
};

/// A storage failure, saying what was being done. Cloneable so that one failed group commit
/// can be reported to every session that was waiting on it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{doing}: {cause}")]
pub struct StoreError {
    doing: String,
    cause: Arc<str>,
}

impl StoreError {
    /// An error from `doing` caused by `cause`.
    pub fn from_cause(doing: impl Into<String>, cause: impl std::fmt::Display) -> Self {
        Self {
            doing: doing.into(),
            cause: cause.to_string().into(),
        }
    }
}

trait Context<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, StoreError>;
}

impl<T, E: std::fmt::Display> Context<T> for Result<T, E> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, StoreError> {
        self.map_err(|e| StoreError::from_cause(what(), e))
    }
}

/// A message as stored: its place in the session and its token count.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredMessage {
    pub seq: u64,
    pub tokens: u32,
    pub message: Arc<Message>,
}

#[derive(Serialize)]
struct MessageRow<'a> {
    tokens: u32,
    message: &'a Message,
}

#[derive(Deserialize)]
struct MessageRowOwned {
    tokens: u32,
    message: Message,
}

/// A key for the next audit record: later than every key before it.
fn next_audit_id() -> String {
    static IDS: std::sync::Mutex<Option<ulid::Generator>> = std::sync::Mutex::new(None);
    let mut ids = IDS.lock().unwrap_or_else(|e| e.into_inner());
    let generator = ids.get_or_insert_with(ulid::Generator::new);
    generator
        .generate()
        .unwrap_or_else(|_| ulid::Ulid::new())
        .to_string()
}

/// What one session adds in one commit.
#[derive(Clone, Debug)]
pub struct WriteBatch {
    pub session_id: SessionId,
    pub messages: Vec<StoredMessage>,
    pub checkpoint: Option<TurnCheckpoint>,
    pub run: Option<RunRecord>,
    pub session: Option<SessionRecord>,
    /// Ledger totals, as they now stand (the ledger is their only writer).
    pub costs: Vec<(String, CostTotals)>,
    /// The Guardian's view of a run, as it now stands (`None`: the run ended, forget it).
    pub guardian: Option<(RunId, Option<RunWatch>)>,
    /// The session's context window, when it moved.
    pub compaction: Option<Compaction>,
    /// New memories, indexed as they are stored.
    pub memories: Vec<MemoryEntry>,
    /// The Judge's verdicts since the last batch.
    pub verdicts: Vec<VerdictRecord>,
    /// A Director run's plan and progress, as they now stand.
    pub plan: Option<crate::director::PlanRecord>,
    /// Decisions of the security gate.
    pub audit: Vec<AuditRecord>,
    /// Approval requests kept while their run is paused (`None`: done with, forget it).
    pub approvals: Vec<(String, Option<crate::security::PendingApproval>)>,
    /// What a person approved "always" in this batch's session.
    pub always: Vec<String>,
}

impl WriteBatch {
    /// An empty batch for `session_id`.
    pub fn new(session_id: SessionId) -> Self {
        Self {
            session_id,
            messages: Vec::new(),
            checkpoint: None,
            run: None,
            session: None,
            costs: Vec::new(),
            guardian: None,
            compaction: None,
            memories: Vec::new(),
            verdicts: Vec::new(),
            plan: None,
            audit: Vec::new(),
            approvals: Vec::new(),
            always: Vec::new(),
        }
    }
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

/// The database.
#[derive(Clone)]
pub struct Store {
    db: Arc<Database>,
    durability: Durability,
}

impl Store {
    /// Opens (or creates) the database at `path`. With `durable`, every commit is on disk when
    /// it returns; without, a crash may lose the latest commits.
    pub fn open(path: &Path, durable: bool) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .doing(|| format!("creating the directory {}", dir.display()))?;
        }
        let db = Database::create(path).doing(|| format!("opening {}", path.display()))?;
        let store = Store {
            db: Arc::new(db),
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
        let txn = self.db.begin_write().doing(doing)?;
        txn.open_table(MESSAGES).doing(doing)?;
        txn.open_table(CHECKPOINTS).doing(doing)?;
        txn.open_table(RUNS).doing(doing)?;
        txn.open_table(SESSIONS).doing(doing)?;
        txn.open_table(COSTS).doing(doing)?;
        txn.open_table(GUARDIAN).doing(doing)?;
        txn.open_table(COMPACTIONS).doing(doing)?;
        txn.open_table(MEMORIES).doing(doing)?;
        txn.open_table(MEMORY_TERMS).doing(doing)?;
        txn.open_table(MEMORY_STATS).doing(doing)?;
        txn.open_table(VERDICTS).doing(doing)?;
        txn.open_table(PLANS).doing(doing)?;
        txn.open_table(AUDIT).doing(doing)?;
        txn.open_table(APPROVALS).doing(doing)?;
        txn.open_table(ALWAYS).doing(doing)?;
        txn.commit().doing(doing)
    }

    /// Writes every batch in one transaction and commits once.
    pub fn write(&self, batches: &[WriteBatch]) -> Result<(), StoreError> {
        let doing = || format!("writing {} batch(es) to the store", batches.len());
        let mut txn = self.db.begin_write().doing(doing)?;
        txn.set_durability(self.durability).doing(doing)?;
        {
            let mut messages = txn.open_table(MESSAGES).doing(doing)?;
            let mut checkpoints = txn.open_table(CHECKPOINTS).doing(doing)?;
            let mut runs = txn.open_table(RUNS).doing(doing)?;
            let mut sessions = txn.open_table(SESSIONS).doing(doing)?;
            let mut costs = txn.open_table(COSTS).doing(doing)?;
            let mut guardian = txn.open_table(GUARDIAN).doing(doing)?;
            let mut compactions = txn.open_table(COMPACTIONS).doing(doing)?;
            let mut verdicts = txn.open_table(VERDICTS).doing(doing)?;
            let mut plans = txn.open_table(PLANS).doing(doing)?;
            let mut audit = txn.open_table(AUDIT).doing(doing)?;
            let mut approvals = txn.open_table(APPROVALS).doing(doing)?;
            let mut always = txn.open_table(ALWAYS).doing(doing)?;
            for batch in batches {
                let sid = batch.session_id.as_str();
                for m in &batch.messages {
                    let row = serde_json::to_vec(&MessageRow {
                        tokens: m.tokens,
                        message: &m.message,
                    })
                    .doing(doing)?;
                    messages.insert((sid, m.seq), row.as_slice()).doing(doing)?;
                }
                if let Some(c) = &batch.checkpoint {
                    let row = serde_json::to_vec(c).doing(doing)?;
                    checkpoints
                        .insert((sid, c.last_seq), row.as_slice())
                        .doing(doing)?;
                }
                if let Some(r) = &batch.run {
                    let row = serde_json::to_vec(r).doing(doing)?;
                    runs.insert((sid, r.run_id.as_str()), row.as_slice())
                        .doing(doing)?;
                }
                if let Some(s) = &batch.session {
                    let row = serde_json::to_vec(s).doing(doing)?;
                    sessions.insert(sid, row.as_slice()).doing(doing)?;
                }
                for (key, totals) in &batch.costs {
                    let row = serde_json::to_vec(totals).doing(doing)?;
                    costs.insert(key.as_str(), row.as_slice()).doing(doing)?;
                }
                match &batch.guardian {
                    Some((run_id, Some(watch))) => {
                        let row = serde_json::to_vec(watch).doing(doing)?;
                        guardian
                            .insert(run_id.as_str(), row.as_slice())
                            .doing(doing)?;
                    }
                    Some((run_id, None)) => {
                        guardian.remove(run_id.as_str()).doing(doing)?;
                    }
                    None => {}
                }
                if let Some(c) = &batch.compaction {
                    let row = serde_json::to_vec(c).doing(doing)?;
                    compactions.insert(sid, row.as_slice()).doing(doing)?;
                }
                if let Some(p) = &batch.plan {
                    let row = serde_json::to_vec(p).doing(doing)?;
                    plans.insert(sid, row.as_slice()).doing(doing)?;
                }
                for a in &batch.audit {
                    let row = serde_json::to_vec(a).doing(doing)?;
                    // Monotonic ulids sort by time even within a millisecond.
                    let id = next_audit_id();
                    audit
                        .insert((sid, id.as_str()), row.as_slice())
                        .doing(doing)?;
                }
                for (id, kept) in &batch.approvals {
                    match kept {
                        Some(request) => {
                            let row = serde_json::to_vec(request).doing(doing)?;
                            approvals.insert(id.as_str(), row.as_slice()).doing(doing)?;
                        }
                        None => {
                            approvals.remove(id.as_str()).doing(doing)?;
                        }
                    }
                }
                for key in &batch.always {
                    always.insert((sid, key.as_str()), ()).doing(doing)?;
                }
                for v in &batch.verdicts {
                    let row = serde_json::to_vec(v).doing(doing)?;
                    verdicts
                        .insert((v.run_id.as_str(), v.n), row.as_slice())
                        .doing(doing)?;
                }
            }
        }
        if batches.iter().any(|b| !b.memories.is_empty()) {
            memory::index(&txn, batches.iter().flat_map(|b| &b.memories)).doing(doing)?;
        }
        txn.commit().doing(doing)
    }

    /// For each of `ids`, the highest seq a new message may take without leaving a hole: one
    /// past the last one stored, or the start of the context window if a compaction moved it
    /// further. Read in one transaction.
    pub fn next_seqs<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a SessionId>,
    ) -> Result<HashMap<SessionId, u64>, StoreError> {
        let doing = || "reading where sessions go on".to_string();
        let txn = self.db.begin_read().doing(doing)?;
        let messages = txn.open_table(MESSAGES).doing(doing)?;
        let compactions = txn.open_table(COMPACTIONS).doing(doing)?;
        let mut out = HashMap::new();
        for id in ids {
            let mut next = match messages
                .range((id.as_str(), 0)..=(id.as_str(), u64::MAX))
                .doing(doing)?
                .next_back()
            {
                Some(row) => row.doing(doing)?.0.value().1 + 1,
                None => 0,
            };
            if let Some(row) = compactions.get(id.as_str()).doing(doing)? {
                let compaction: Compaction = serde_json::from_slice(row.value()).doing(doing)?;
                next = next.max(compaction.first_kept_seq);
            }
            out.insert(id.clone(), next);
        }
        Ok(out)
    }

    /// Loads a session's whole history, record and unfinished runs. An unknown session loads
    /// empty.
    pub fn load_session(&self, id: &SessionId) -> Result<SessionHistory, StoreError> {
        self.load(id, false)
    }

    /// Like [`Self::load_session`], but reads only the messages of the context window (from
    /// the last compaction on): what a session needs to go on, read in time that does not grow
    /// with what was pruned.
    pub fn load_session_window(&self, id: &SessionId) -> Result<SessionHistory, StoreError> {
        self.load(id, true)
    }

    fn load(&self, id: &SessionId, window_only: bool) -> Result<SessionHistory, StoreError> {
        let doing = || format!("loading session {id}");
        let txn = self.db.begin_read().doing(doing)?;
        let mut history = SessionHistory::default();
        let compactions = txn.open_table(COMPACTIONS).doing(doing)?;
        history.compaction = compactions
            .get(id.as_str())
            .doing(doing)?
            .map(|v| serde_json::from_slice::<Compaction>(v.value()).doing(doing))
            .transpose()?;
        let first = match &history.compaction {
            Some(c) if window_only => c.first_kept_seq,
            _ => 0,
        };
        let messages = txn.open_table(MESSAGES).doing(doing)?;
        let mut last = messages
            .range((id.as_str(), 0)..=(id.as_str(), u64::MAX))
            .doing(doing)?;
        if let Some(row) = last.next_back() {
            history.next_seq = row.doing(doing)?.0.value().1 + 1;
        }
        for row in messages
            .range((id.as_str(), first)..=(id.as_str(), u64::MAX))
            .doing(doing)?
        {
            let (key, value) = row.doing(doing)?;
            let (_, seq) = key.value();
            let row: MessageRowOwned = serde_json::from_slice(value.value())
                .doing(|| format!("decoding message {seq} of session {id}"))?;
            history.messages.push(StoredMessage {
                seq,
                tokens: row.tokens,
                message: Arc::new(row.message),
            });
        }
        history.record = self.session_record_in(&txn, id)?;
        history.unfinished_runs = self
            .session_runs_in(&txn, id)?
            .into_iter()
            .filter(|r| r.status.is_none())
            .collect();
        Ok(history)
    }

    /// A session's record, if the session exists (without reading its history).
    pub fn session_record(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError> {
        let txn = self
            .db
            .begin_read()
            .doing(|| format!("reading the record of session {id}"))?;
        self.session_record_in(&txn, id)
    }

    fn session_record_in(
        &self,
        txn: &redb::ReadTransaction,
        id: &SessionId,
    ) -> Result<Option<SessionRecord>, StoreError> {
        let doing = || format!("reading the record of session {id}");
        let sessions = txn.open_table(SESSIONS).doing(doing)?;
        sessions
            .get(id.as_str())
            .doing(doing)?
            .map(|v| serde_json::from_slice(v.value()).doing(doing))
            .transpose()
    }

    /// A session's runs, oldest first.
    pub fn session_runs(&self, id: &SessionId) -> Result<Vec<RunRecord>, StoreError> {
        let txn = self
            .db
            .begin_read()
            .doing(|| format!("reading the runs of session {id}"))?;
        self.session_runs_in(&txn, id)
    }

    fn session_runs_in(
        &self,
        txn: &redb::ReadTransaction,
        id: &SessionId,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let doing = || format!("reading the runs of session {id}");
        let runs = txn.open_table(RUNS).doing(doing)?;
        let mut out = Vec::new();
        // Every run id of the session sorts between "" and the highest character.
        for row in runs
            .range((id.as_str(), "")..(id.as_str(), "\u{10FFFF}"))
            .doing(doing)?
        {
            let (_, value) = row.doing(doing)?;
            out.push(serde_json::from_slice(value.value()).doing(doing)?);
        }
        Ok(out)
    }

    /// The Director's plan of session `id`, if it ever had one.
    pub fn plan(&self, id: &SessionId) -> Result<Option<crate::director::PlanRecord>, StoreError> {
        let doing = || format!("reading the plan of session {id}");
        let txn = self.db.begin_read().doing(doing)?;
        let table = txn.open_table(PLANS).doing(doing)?;
        table
            .get(id.as_str())
            .doing(doing)?
            .map(|v| serde_json::from_slice(v.value()).doing(doing))
            .transpose()
    }

    /// The security gate's decisions in session `id`, in order.
    pub fn audit(&self, id: &SessionId) -> Result<Vec<AuditRecord>, StoreError> {
        let doing = || format!("reading the audit trail of session {id}");
        let txn = self.db.begin_read().doing(doing)?;
        let table = txn.open_table(AUDIT).doing(doing)?;
        let mut out = Vec::new();
        for row in table
            .range((id.as_str(), "")..(id.as_str(), "\u{10FFFF}"))
            .doing(doing)?
        {
            out.push(serde_json::from_slice(row.doing(doing)?.1.value()).doing(doing)?);
        }
        Ok(out)
    }

    /// The approval requests kept while their runs are paused.
    pub fn paused_approvals(&self) -> Result<Vec<crate::security::PendingApproval>, StoreError> {
        let doing = || "reading the approval requests of paused runs".to_string();
        let txn = self.db.begin_read().doing(doing)?;
        let table = txn.open_table(APPROVALS).doing(doing)?;
        let mut out = Vec::new();
        for row in table.iter().doing(doing)? {
            out.push(serde_json::from_slice(row.doing(doing)?.1.value()).doing(doing)?);
        }
        Ok(out)
    }

    /// What people approved "always", per session.
    pub fn always_allowed(&self) -> Result<HashMap<SessionId, HashSet<String>>, StoreError> {
        let doing = || "reading the calls approved for whole sessions".to_string();
        let txn = self.db.begin_read().doing(doing)?;
        let table = txn.open_table(ALWAYS).doing(doing)?;
        let mut out: HashMap<SessionId, HashSet<String>> = HashMap::new();
        for row in table.iter().doing(doing)? {
            let (key, _) = row.doing(doing)?;
            let (session, what) = key.value();
            out.entry(SessionId::new(session))
                .or_default()
                .insert(what.to_owned());
        }
        Ok(out)
    }

    /// The Judge's verdicts on a run, in order.
    pub fn verdicts(&self, run: &RunId) -> Result<Vec<VerdictRecord>, StoreError> {
        let doing = || format!("reading the verdicts of run {run}");
        let txn = self.db.begin_read().doing(doing)?;
        let table = txn.open_table(VERDICTS).doing(doing)?;
        let mut out = Vec::new();
        for row in table
            .range((run.as_str(), 0)..=(run.as_str(), u32::MAX))
            .doing(doing)?
        {
            out.push(serde_json::from_slice(row.doing(doing)?.1.value()).doing(doing)?);
        }
        Ok(out)
    }

    /// The turn checkpoints of a session, oldest first.
    pub fn checkpoints(&self, id: &SessionId) -> Result<Vec<TurnCheckpoint>, StoreError> {
        let doing = || format!("reading the checkpoints of session {id}");
        let txn = self.db.begin_read().doing(doing)?;
        let table = txn.open_table(CHECKPOINTS).doing(doing)?;
        let mut out = Vec::new();
        for row in table
            .range((id.as_str(), 0)..=(id.as_str(), u64::MAX))
            .doing(doing)?
        {
            let (_, value) = row.doing(doing)?;
            out.push(serde_json::from_slice(value.value()).doing(doing)?);
        }
        Ok(out)
    }

    /// The ledger's totals under `key`, if any were recorded.
    pub fn cost_totals(&self, key: &str) -> Result<Option<CostTotals>, StoreError> {
        let doing = || format!("reading the cost totals of {key}");
        let txn = self.db.begin_read().doing(doing)?;
        let table = txn.open_table(COSTS).doing(doing)?;
        table
            .get(key)
            .doing(doing)?
            .map(|v| serde_json::from_slice(v.value()).doing(doing))
            .transpose()
    }

    /// Every ledger key starting with `prefix`, with its totals, in key order.
    pub fn cost_totals_with_prefix(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, CostTotals)>, StoreError> {
        let doing = || format!("listing the cost totals under {prefix}");
        let txn = self.db.begin_read().doing(doing)?;
        let table = txn.open_table(COSTS).doing(doing)?;
        let end = format!("{prefix}\u{10FFFF}");
        let mut out = Vec::new();
        for row in table.range(prefix..end.as_str()).doing(doing)? {
            let (key, value) = row.doing(doing)?;
            let totals = serde_json::from_slice(value.value()).doing(doing)?;
            out.push((key.value().to_owned(), totals));
        }
        Ok(out)
    }

    /// What the Guardian recorded of run `run_id`, if anything.
    pub fn guardian_watch(&self, run_id: &RunId) -> Result<Option<RunWatch>, StoreError> {
        let doing = || format!("reading the Guardian's record of run {run_id}");
        let txn = self.db.begin_read().doing(doing)?;
        let table = txn.open_table(GUARDIAN).doing(doing)?;
        table
            .get(run_id.as_str())
            .doing(doing)?
            .map(|v| serde_json::from_slice(v.value()).doing(doing))
            .transpose()
    }

    /// Every session's record.
    pub fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        let doing = || "listing sessions".to_string();
        let txn = self.db.begin_read().doing(doing)?;
        let table = txn.open_table(SESSIONS).doing(doing)?;
        let mut out = Vec::new();
        for row in table.iter().doing(doing)? {
            let (_, value) = row.doing(doing)?;
            out.push(serde_json::from_slice(value.value()).doing(doing)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_round_trip_and_sessions_stay_apart() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.redb"), true).unwrap();
        let a = SessionId::new("s_a");
        let b = SessionId::new("s_b");
        let mut batch_a = WriteBatch::new(a.clone());
        for seq in 0..3 {
            batch_a.messages.push(StoredMessage {
                seq,
                tokens: 5,
                message: Arc::new(Message::user(format!("a{seq}"))),
            });
        }
        batch_a.run = Some(RunRecord {
            run_id: RunId::new("r_1"),
            session_id: a.clone(),
            prompt: "p".into(),
            status: None,
            reason: None,
            output: String::new(),
            turns: 0,
            input_tokens: 0,
            output_tokens: 0,
            cost_microcents: 0,
            started_at_ms: 1,
            ended_at_ms: None,
            goal: None,
        });
        let mut batch_b = WriteBatch::new(b.clone());
        batch_b.messages.push(StoredMessage {
            seq: 0,
            tokens: 1,
            message: Arc::new(Message::user("b0")),
        });
        store.write(&[batch_a, batch_b]).unwrap();
        drop(store);

        let store = Store::open(&dir.path().join("t.redb"), true).unwrap();
        let ha = store.load_session(&a).unwrap();
        assert_eq!(ha.messages.len(), 3);
        assert_eq!(ha.messages[2].seq, 2);
        assert_eq!(*ha.messages[1].message, Message::user("a1"));
        assert_eq!(ha.unfinished_runs.len(), 1);
        let hb = store.load_session(&b).unwrap();
        assert_eq!(hb.messages.len(), 1);
        assert!(hb.unfinished_runs.is_empty());
        assert!(store
            .load_session(&SessionId::new("s_none"))
            .unwrap()
            .messages
            .is_empty());
    }

    #[test]
    fn the_window_is_read_from_the_last_compaction_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.redb"), false).unwrap();
        let id = SessionId::new("s_w");
        let mut batch = WriteBatch::new(id.clone());
        for seq in 0..10 {
            batch.messages.push(StoredMessage {
                seq,
                tokens: 1,
                message: Arc::new(Message::user(format!("m{seq}"))),
            });
        }
        batch.compaction = Some(Compaction {
            first_kept_seq: 7,
            summary: None,
        });
        store.write(&[batch]).unwrap();
        let window = store.load_session_window(&id).unwrap();
        let seqs: Vec<u64> = window.messages.iter().map(|m| m.seq).collect();
        assert_eq!(seqs, [7, 8, 9]);
        assert_eq!(window.next_seq, 10);
        let whole = store.load_session(&id).unwrap();
        assert_eq!((whole.messages.len(), whole.next_seq), (10, 10));
    }
}
