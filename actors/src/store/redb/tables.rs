//! Every redb table, declared once with its key and record type. Values are JSON: readable with
//! any tool, and the records can grow fields without a migration. The bytes on disk are plain
//! `&[u8]` values, so a database written before tables were typed opens unchanged; the types
//! live in [`Table`], which encodes and decodes each row and says which table a bad row is in
//! (rather than panicking inside redb, as a `Value` that fails to decode would have to).

use super::super::{Context, StoreError};
use redb::{Key, ReadTransaction, ReadableTable, TableDefinition, WriteTransaction};
use ryvos_protocol::records::{
    AuditRecord, Compaction, CostTotals, Credential, MemoryEntry, PendingApproval, PlanRecord,
    RunRecord, RunWatch, SessionRecord, TurnCheckpoint, VerdictRecord,
};
use ryvos_protocol::Message;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::borrow::Borrow;
use std::marker::PhantomData;
use std::ops::RangeBounds;
use std::sync::Arc;

/// A table whose values are `V`, stored as JSON.
pub(super) struct Table<K: Key + 'static, V> {
    name: &'static str,
    _types: PhantomData<fn(K) -> V>,
}

/// A message as its table holds it: the message and its token count (the seq is the key).
#[derive(Serialize, Deserialize)]
pub(super) struct MessageRow {
    pub tokens: u32,
    pub message: Arc<Message>,
}

impl<K: Key + 'static, V: Serialize + DeserializeOwned> Table<K, V> {
    const fn new(name: &'static str) -> Self {
        Self {
            name,
            _types: PhantomData,
        }
    }

    /// The table as redb knows it.
    pub(super) fn definition(&self) -> TableDefinition<'static, K, &'static [u8]> {
        TableDefinition::new(self.name)
    }

    /// Opens the table for writing in `txn`.
    pub(super) fn open<'t>(
        &self,
        txn: &'t WriteTransaction,
        doing: impl Fn() -> String,
    ) -> Result<Writer<'t, K, V>, StoreError> {
        Ok(Writer {
            table: txn.open_table(self.definition()).doing(&doing)?,
            name: self.name,
            _value: PhantomData,
        })
    }

    /// The value under `key`, if any.
    pub(super) fn get<'k>(
        &self,
        txn: &ReadTransaction,
        key: impl Borrow<K::SelfType<'k>>,
        doing: impl Fn() -> String,
    ) -> Result<Option<V>, StoreError> {
        let table = txn.open_table(self.definition()).doing(&doing)?;
        let row = table.get(key).doing(&doing)?;
        row.map(|v| decode(self.name, v.value(), &doing))
            .transpose()
    }

    /// The values in `range`, in key order.
    pub(super) fn values<'k, R: Borrow<K::SelfType<'k>> + 'k>(
        &self,
        txn: &ReadTransaction,
        range: impl RangeBounds<R> + 'k,
        doing: impl Fn() -> String,
    ) -> Result<Vec<V>, StoreError> {
        let rows = self.entries_in(txn, range, |_| (), doing)?;
        Ok(rows.into_iter().map(|((), value)| value).collect())
    }

    /// The keys and values in `range`, in key order, each key as `key` maps it.
    pub(super) fn entries_in<'k, R: Borrow<K::SelfType<'k>> + 'k, T>(
        &self,
        txn: &ReadTransaction,
        range: impl RangeBounds<R> + 'k,
        key: impl Fn(K::SelfType<'_>) -> T,
        doing: impl Fn() -> String,
    ) -> Result<Vec<(T, V)>, StoreError> {
        let table = txn.open_table(self.definition()).doing(&doing)?;
        let mut out = Vec::new();
        for row in table.range(range).doing(&doing)? {
            let (k, v) = row.doing(&doing)?;
            out.push((key(k.value()), decode(self.name, v.value(), &doing)?));
        }
        Ok(out)
    }

    /// Every value, in key order.
    pub(super) fn all(
        &self,
        txn: &ReadTransaction,
        doing: impl Fn() -> String,
    ) -> Result<Vec<V>, StoreError> {
        let table = txn.open_table(self.definition()).doing(&doing)?;
        let mut out = Vec::new();
        for row in table.iter().doing(&doing)? {
            out.push(decode(self.name, row.doing(&doing)?.1.value(), &doing)?);
        }
        Ok(out)
    }
}

/// Reads a row of table `name`, saying which table a row that is not a `V` is in.
fn decode<V: DeserializeOwned>(
    name: &str,
    bytes: &[u8],
    doing: impl Fn() -> String,
) -> Result<V, StoreError> {
    serde_json::from_slice(bytes).doing(|| {
        let record = std::any::type_name::<V>()
            .rsplit("::")
            .next()
            .unwrap_or("record");
        format!("{}: a row of table `{name}` is not a {record}", doing())
    })
}

/// A table open for writing in a transaction.
pub(super) struct Writer<'t, K: Key + 'static, V> {
    table: redb::Table<'t, K, &'static [u8]>,
    name: &'static str,
    _value: PhantomData<fn(V)>,
}

impl<K: Key + 'static, V: Serialize + DeserializeOwned> Writer<'_, K, V> {
    /// The value under `key`, if any.
    pub(super) fn get<'k>(
        &self,
        key: impl Borrow<K::SelfType<'k>>,
        doing: impl Fn() -> String,
    ) -> Result<Option<V>, StoreError> {
        let row = self.table.get(key).doing(&doing)?;
        row.map(|v| decode(self.name, v.value(), &doing))
            .transpose()
    }

    /// Stores `value` under `key`, and returns what it replaced.
    pub(super) fn insert<'k>(
        &mut self,
        key: impl Borrow<K::SelfType<'k>>,
        value: &V,
        doing: impl Fn() -> String,
    ) -> Result<Option<V>, StoreError> {
        let bytes = serde_json::to_vec(value).doing(&doing)?;
        let old = self.table.insert(key, bytes.as_slice()).doing(&doing)?;
        old.map(|v| decode(self.name, v.value(), &doing))
            .transpose()
    }

    /// Forgets the value under `key`; whether there was one.
    pub(super) fn remove<'k>(
        &mut self,
        key: impl Borrow<K::SelfType<'k>>,
        doing: impl Fn() -> String,
    ) -> Result<bool, StoreError> {
        Ok(self.table.remove(key).doing(&doing)?.is_some())
    }
}

/// `(session_id, seq) -> MessageRow`: the append-only history.
pub(super) const MESSAGES: Table<(&str, u64), MessageRow> = Table::new("messages");

/// `(session_id, last_seq) -> TurnCheckpoint`: one record per completed turn.
pub(super) const CHECKPOINTS: Table<(&str, u64), TurnCheckpoint> = Table::new("checkpoints");

/// `(session_id, run_id) -> RunRecord`: run ids sort by time, so a session's runs are in order.
pub(super) const RUNS: Table<(&str, &str), RunRecord> = Table::new("runs");

/// `session_id -> SessionRecord`: the summary `ryvos sessions` lists.
pub(super) const SESSIONS: Table<&str, SessionRecord> = Table::new("sessions");

/// `key -> CostTotals`: spending per `run:<id>`, `session:<id>`, `day:YYYY-MM-DD` and
/// `month:YYYY-MM` (UTC), kept by the cost ledger.
pub(super) const COSTS: Table<&str, CostTotals> = Table::new("costs");

/// `run_id -> RunWatch`: what the Guardian knows of a run in flight, so that a restarted
/// Guardian goes on where it stood.
pub(super) const GUARDIAN: Table<&str, RunWatch> = Table::new("guardian");

/// `session_id -> Compaction`: where the session's context window starts, and the summary that
/// stands for the messages before it. The messages themselves stay.
pub(super) const COMPACTIONS: Table<&str, Compaction> = Table::new("compactions");

/// `memory_id -> MemoryEntry`: what agents chose to remember, across sessions.
pub(super) const MEMORIES: Table<&str, MemoryEntry> = Table::new("memories");

/// `(term, memory_id) -> tf << 32 | length`: the keyword index over memories, one posting per
/// term a memory holds (its count there, and the memory's length in terms, for BM25).
pub(super) const MEMORY_TERMS: TableDefinition<(&str, &str), u64> =
    TableDefinition::new("memory_terms");

/// `"totals" -> [memories, terms]`: the collection's size, for BM25.
pub(super) const MEMORY_STATS: Table<&str, (u64, u64)> = Table::new("memory_stats");

/// `(run_id, n) -> VerdictRecord`: every verdict the Judge gave a run, in order.
pub(super) const VERDICTS: Table<(&str, u32), VerdictRecord> = Table::new("verdicts");

/// `session_id -> PlanRecord`: a Director run's plan and how far it got, so a crash resumes it.
pub(super) const PLANS: Table<&str, PlanRecord> = Table::new("plans");

/// `(session_id, decision id) -> AuditRecord`: every decision of the security gate.
pub(super) const AUDIT: Table<(&str, &str), AuditRecord> = Table::new("audit");

/// `request_id -> PendingApproval`: approval requests whose run paused while they waited.
pub(super) const APPROVALS: Table<&str, PendingApproval> = Table::new("approvals");

/// `(session_id, what) -> ()`: calls a person approved "always" for the rest of a session.
pub(super) const ALWAYS: TableDefinition<(&str, &str), ()> = TableDefinition::new("always");

/// `id -> Credential`: tokens, console sessions, the approval links' key and spent links.
pub(super) const CREDENTIALS: Table<&str, Credential> = Table::new("credentials");
