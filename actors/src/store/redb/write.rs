//! One group commit: every batch's writes in one redb transaction.

use super::memory;
use super::tables::{MessageRow, Table, Writer};
use super::tables::{
    ALWAYS, APPROVALS, AUDIT, CHECKPOINTS, COMPACTIONS, COSTS, GUARDIAN, MESSAGES, PLANS, RUNS,
    SESSIONS, VERDICTS,
};
use crate::store::{Context, StoreError, Write, WriteBatch};
use redb::{Key, WriteTransaction};
use ryvos_protocol::records::{
    AuditRecord, Compaction, CostTotals, PendingApproval, PlanRecord, RunRecord, RunWatch,
    SessionRecord, TurnCheckpoint, VerdictRecord,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

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

/// Adds `add` to the totals under `key`.
fn add_cost(
    table: &mut Writer<'_, &'static str, CostTotals>,
    key: &str,
    add: &CostTotals,
    doing: impl Fn() -> String + Copy,
) -> Result<(), StoreError> {
    let mut totals = table.get(key, doing)?.unwrap_or_default();
    totals.add(add);
    table.insert(key, &totals, doing).map(drop)
}

/// Applies every write of `batches` in `txn`.
pub(super) fn apply(txn: &WriteTransaction, batches: &[WriteBatch]) -> Result<(), StoreError> {
    let doing = || format!("writing {} batch(es) to the store", batches.len());
    let mut t = Tables::default();
    let mut memories = Vec::new();
    for batch in batches {
        let sid = batch.session_id.as_str();
        for write in &batch.writes {
            match write {
                Write::Message(m) => {
                    let row = MessageRow {
                        tokens: m.tokens,
                        message: m.message.clone(),
                    };
                    open(&mut t.messages, &MESSAGES, txn, doing)?.insert(
                        (sid, m.seq),
                        &row,
                        doing,
                    )?;
                }
                Write::Checkpoint(c) => {
                    let table = open(&mut t.checkpoints, &CHECKPOINTS, txn, doing)?;
                    table.insert((sid, c.last_seq), c, doing)?;
                }
                Write::Run(r) => {
                    let table = open(&mut t.runs, &RUNS, txn, doing)?;
                    table.insert((sid, r.run_id.as_str()), r, doing)?;
                }
                Write::Session(s) => {
                    open(&mut t.sessions, &SESSIONS, txn, doing)?.insert(sid, s, doing)?;
                }
                Write::Compaction(c) => {
                    open(&mut t.compactions, &COMPACTIONS, txn, doing)?.insert(sid, c, doing)?;
                }
                Write::Cost { key, add } => {
                    add_cost(open(&mut t.costs, &COSTS, txn, doing)?, key, add, doing)?;
                }
                Write::Watch { run_id, watch } => {
                    let table = open(&mut t.guardian, &GUARDIAN, txn, doing)?;
                    match watch {
                        Some(watch) => table.insert(run_id.as_str(), watch, doing).map(drop)?,
                        None => table.remove(run_id.as_str(), doing).map(drop)?,
                    }
                }
                Write::Memory(entry) => memories.push(entry),
                Write::Verdict(v) => {
                    let table = open(&mut t.verdicts, &VERDICTS, txn, doing)?;
                    table.insert((v.run_id.as_str(), v.n), v, doing)?;
                }
                Write::Plan(p) => {
                    open(&mut t.plans, &PLANS, txn, doing)?.insert(sid, p, doing)?;
                }
                Write::Audit(a) => {
                    // Monotonic ulids sort by time even within a millisecond.
                    let id = next_audit_id();
                    open(&mut t.audit, &AUDIT, txn, doing)?.insert((sid, id.as_str()), a, doing)?;
                }
                Write::Approval { request_id, kept } => {
                    let table = open(&mut t.approvals, &APPROVALS, txn, doing)?;
                    match kept {
                        Some(request) => table
                            .insert(request_id.as_str(), request, doing)
                            .map(drop)?,
                        None => table.remove(request_id.as_str(), doing).map(drop)?,
                    }
                }
                Write::Always(what) => {
                    let mut always = txn.open_table(ALWAYS).doing(doing)?;
                    always.insert((sid, what.as_str()), ()).doing(doing)?;
                }
            }
        }
    }
    // The tables are closed before the memory index opens its own.
    drop(t);
    if !memories.is_empty() {
        memory::index(txn, memories.into_iter()).doing(doing)?;
    }
    Ok(())
}

/// The tables a group commit writes, each opened when first needed: a commit of messages and
/// a checkpoint opens two tables, not twelve.
#[derive(Default)]
struct Tables<'t> {
    messages: Option<Writer<'t, (&'static str, u64), MessageRow>>,
    checkpoints: Option<Writer<'t, (&'static str, u64), TurnCheckpoint>>,
    runs: Option<Writer<'t, (&'static str, &'static str), RunRecord>>,
    sessions: Option<Writer<'t, &'static str, SessionRecord>>,
    compactions: Option<Writer<'t, &'static str, Compaction>>,
    costs: Option<Writer<'t, &'static str, CostTotals>>,
    guardian: Option<Writer<'t, &'static str, RunWatch>>,
    verdicts: Option<Writer<'t, (&'static str, u32), VerdictRecord>>,
    plans: Option<Writer<'t, &'static str, PlanRecord>>,
    audit: Option<Writer<'t, (&'static str, &'static str), AuditRecord>>,
    approvals: Option<Writer<'t, &'static str, PendingApproval>>,
}

/// The table in `slot`, opening it in `txn` the first time.
fn open<'s, 't, K: Key + 'static, V: Serialize + DeserializeOwned>(
    slot: &'s mut Option<Writer<'t, K, V>>,
    table: &Table<K, V>,
    txn: &'t WriteTransaction,
    doing: impl Fn() -> String,
) -> Result<&'s mut Writer<'t, K, V>, StoreError> {
    Ok(match slot {
        Some(writer) => writer,
        None => slot.insert(table.open(txn, doing)?),
    })
}
