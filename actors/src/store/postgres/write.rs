//! One group commit: every batch's writes in one transaction, its statements pipelined (sent
//! together, answered together: one round trip for the lot, not one per write).

use super::leases::taken_over;
use super::{PgContext, PostgresStore};
use crate::ids::SessionId;
use crate::store::terms::indexed_terms;
use crate::store::{StoreError, Write, WriteBatch};
use ryvos_protocol::records::MemoryEntry;
use std::collections::{BTreeMap, HashMap};
use tokio_postgres::types::{Json, ToSql};

/// The fenced sessions whose lease still carries this daemon's generation, locked in session
/// order (as renewals lock them).
const FENCE: &str = "SELECT l.session_id FROM leases l \
    JOIN unnest($1::text[], $2::bigint[]) AS mine(session_id, generation) \
    ON l.session_id = mine.session_id AND l.generation = mine.generation \
    WHERE l.owner = $3 ORDER BY l.session_id FOR SHARE OF l";

const MESSAGE: &str = "INSERT INTO messages (session_id, seq, tokens, message) \
    VALUES ($1, $2, $3, $4) ON CONFLICT (session_id, seq) \
    DO UPDATE SET tokens = EXCLUDED.tokens, message = EXCLUDED.message";
const CHECKPOINT: &str = "INSERT INTO checkpoints (session_id, last_seq, record) \
    VALUES ($1, $2, $3) ON CONFLICT (session_id, last_seq) DO UPDATE SET record = EXCLUDED.record";
const RUN: &str = "INSERT INTO runs (session_id, run_id, finished, record) \
    VALUES ($1, $2, $3, $4) ON CONFLICT (session_id, run_id) \
    DO UPDATE SET finished = EXCLUDED.finished, record = EXCLUDED.record";
const SESSION: &str = "INSERT INTO sessions (session_id, record) VALUES ($1, $2) \
    ON CONFLICT (session_id) DO UPDATE SET record = EXCLUDED.record";
const COMPACTION: &str = "INSERT INTO compactions (session_id, first_kept_seq, record) \
    VALUES ($1, $2, $3) ON CONFLICT (session_id) \
    DO UPDATE SET first_kept_seq = EXCLUDED.first_kept_seq, record = EXCLUDED.record";
/// Each daemon adds to its own row of a total (see migration 6).
const COST: &str = "INSERT INTO costs \
    (key, writer, calls, input_tokens, output_tokens, cost_microcents, estimated_calls) \
    VALUES ($1, $7, $2, $3, $4, $5, $6) ON CONFLICT (key, writer) DO UPDATE SET \
    calls = costs.calls + EXCLUDED.calls, \
    input_tokens = costs.input_tokens + EXCLUDED.input_tokens, \
    output_tokens = costs.output_tokens + EXCLUDED.output_tokens, \
    cost_microcents = costs.cost_microcents + EXCLUDED.cost_microcents, \
    estimated_calls = costs.estimated_calls + EXCLUDED.estimated_calls";
const WATCH: &str = "INSERT INTO guardian (run_id, watch) VALUES ($1, $2) \
    ON CONFLICT (run_id) DO UPDATE SET watch = EXCLUDED.watch";
const FORGET_WATCH: &str = "DELETE FROM guardian WHERE run_id = $1";
const MEMORY: &str = "INSERT INTO memories (id, record, has_vector, terms, term_counts, length) \
    VALUES ($1, $2, $3, $4::text::tsvector, $5, $6) ON CONFLICT (id) DO UPDATE SET \
    record = EXCLUDED.record, has_vector = EXCLUDED.has_vector, terms = EXCLUDED.terms, \
    term_counts = EXCLUDED.term_counts, length = EXCLUDED.length";
const VERDICT: &str = "INSERT INTO verdicts (run_id, n, record) VALUES ($1, $2, $3) \
    ON CONFLICT (run_id, n) DO UPDATE SET record = EXCLUDED.record";
const PLAN: &str = "INSERT INTO plans (session_id, record) VALUES ($1, $2) \
    ON CONFLICT (session_id) DO UPDATE SET record = EXCLUDED.record";
const AUDIT: &str = "INSERT INTO audit (session_id, record) VALUES ($1, $2)";
const APPROVAL: &str = "INSERT INTO approvals (request_id, record) VALUES ($1, $2) \
    ON CONFLICT (request_id) DO UPDATE SET record = EXCLUDED.record";
const FORGET_APPROVAL: &str = "DELETE FROM approvals WHERE request_id = $1";
const ALWAYS: &str = "INSERT INTO always_allowed (session_id, what) VALUES ($1, $2) \
    ON CONFLICT DO NOTHING";

/// A statement's parameters, borrowing from the batches.
type Params<'a> = Vec<Box<dyn ToSql + Sync + Send + 'a>>;

/// One statement to run.
struct Op<'a> {
    sql: &'static str,
    params: Params<'a>,
}

impl PostgresStore {
    /// Stores `batches` in one transaction.
    pub(super) async fn write_batches(&self, batches: &[WriteBatch]) -> Result<(), StoreError> {
        let doing = || format!("writing {} batch(es) to the store", batches.len());
        let ops: Vec<Op> = batches.iter().flat_map(|b| ops(b, &self.node)).collect();
        let mut client = self.pool.get().await.pg(doing)?;
        let txn = client.transaction().await.pg(doing)?;
        if !self.durable {
            txn.batch_execute("SET LOCAL synchronous_commit = off")
                .await
                .pg(doing)?;
        }
        let fences = self.leases.fences(batches);
        let mut statements = HashMap::new();
        for op in &ops {
            if !statements.contains_key(op.sql) {
                let statement = txn.prepare_cached(op.sql).await.pg(doing)?;
                statements.insert(op.sql, statement);
            }
        }
        // The leases first, locked until the commit: no other daemon takes one meanwhile.
        let (ids, generations): (Vec<&str>, Vec<i64>) =
            fences.iter().map(|(id, g)| (id.as_str(), *g)).unzip();
        let check = async {
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            let fence = txn.prepare_cached(FENCE).await?;
            txn.query(&fence, &[&ids, &generations, &&*self.node]).await
        };
        // Sent in order, so that the server applies them in the order they were written.
        let pipelined = ops.iter().map(|op| {
            let params = op.params.iter().map(|p| &**p as &(dyn ToSql + Sync));
            txn.execute_raw(&statements[op.sql], params)
        });
        let (still_held, _) =
            futures_util::future::try_join(check, futures_util::future::try_join_all(pipelined))
                .await
                .pg(doing)?;
        if still_held.len() < ids.len() {
            // Dropped without a commit: the transaction rolls back.
            let held: Vec<String> = still_held.iter().map(|r| r.get(0)).collect();
            let lost = ids.iter().find(|id| !held.iter().any(|h| h == *id));
            let lost = SessionId::new(lost.copied().unwrap_or_default());
            self.leases.mark_lost(&lost);
            return Err(taken_over(&lost));
        }
        txn.commit().await.pg(doing)
    }
}

fn op<'a>(sql: &'static str, params: Params<'a>) -> Op<'a> {
    Op { sql, params }
}

/// The statements that store `batch`, written by daemon `node`.
fn ops<'a>(batch: &'a WriteBatch, node: &'a str) -> Vec<Op<'a>> {
    let sid = batch.session_id.as_str();
    batch
        .writes
        .iter()
        .map(|write| write_op(sid, write, node))
        .collect()
}

/// The statement that stores `write` of session `sid`, written by daemon `node`.
fn write_op<'a>(sid: &'a str, write: &'a Write, node: &'a str) -> Op<'a> {
    match write {
        Write::Message(m) => op(
            MESSAGE,
            vec![
                Box::new(sid),
                Box::new(m.seq as i64),
                Box::new(i64::from(m.tokens)),
                Box::new(Json(&*m.message)),
            ],
        ),
        Write::Checkpoint(c) => op(
            CHECKPOINT,
            vec![
                Box::new(sid),
                Box::new(c.last_seq as i64),
                Box::new(Json(c)),
            ],
        ),
        Write::Run(r) => op(
            RUN,
            vec![
                Box::new(sid),
                Box::new(r.run_id.as_str()),
                Box::new(r.status.is_some()),
                Box::new(Json(r)),
            ],
        ),
        Write::Session(s) => op(SESSION, vec![Box::new(sid), Box::new(Json(s))]),
        Write::Compaction(c) => op(
            COMPACTION,
            vec![
                Box::new(sid),
                Box::new(c.first_kept_seq as i64),
                Box::new(Json(c)),
            ],
        ),
        Write::Cost { key, add } => {
            let count = |n: u64| Box::new(i64::try_from(n).unwrap_or(i64::MAX));
            op(
                COST,
                vec![
                    Box::new(key.as_str()),
                    count(add.calls),
                    count(add.input_tokens),
                    count(add.output_tokens),
                    count(add.cost_microcents),
                    count(add.estimated_calls),
                    Box::new(node),
                ],
            )
        }
        Write::Watch { run_id, watch } => match watch {
            Some(watch) => op(
                WATCH,
                vec![Box::new(run_id.as_str()), Box::new(Json(watch))],
            ),
            None => op(FORGET_WATCH, vec![Box::new(run_id.as_str())]),
        },
        Write::Memory(entry) => memory_op(entry),
        Write::Verdict(v) => op(
            VERDICT,
            vec![
                Box::new(v.run_id.as_str()),
                Box::new(i64::from(v.n)),
                Box::new(Json(v)),
            ],
        ),
        Write::Plan(p) => op(PLAN, vec![Box::new(sid), Box::new(Json(p))]),
        Write::Audit(a) => op(AUDIT, vec![Box::new(sid), Box::new(Json(a))]),
        Write::Approval { request_id, kept } => match kept {
            Some(request) => op(
                APPROVAL,
                vec![Box::new(request_id.as_str()), Box::new(Json(request))],
            ),
            None => op(FORGET_APPROVAL, vec![Box::new(request_id.as_str())]),
        },
        Write::Always(what) => op(ALWAYS, vec![Box::new(sid), Box::new(what.as_str())]),
    }
}

/// The statement that stores (or rewrites) a memory and its place in the keyword index.
fn memory_op(entry: &MemoryEntry) -> Op<'_> {
    let terms = indexed_terms(entry);
    let length = terms.len() as i64;
    let mut counts: BTreeMap<String, u32> = BTreeMap::new();
    for term in terms {
        *counts.entry(term).or_default() += 1;
    }
    op(
        MEMORY,
        vec![
            Box::new(entry.id.as_str()),
            Box::new(Json(entry)),
            Box::new(entry.embedding.is_some()),
            Box::new(tsvector(counts.keys())),
            Box::new(Json(counts)),
            Box::new(length),
        ],
    )
}

/// `terms` as a tsvector literal: each quoted, as is (they are already normalized).
pub(super) fn tsvector<'t>(terms: impl Iterator<Item = &'t String>) -> String {
    terms
        .map(|t| format!("'{}'", t.replace('\\', "\\\\").replace('\'', "''")))
        .collect::<Vec<_>>()
        .join(" ")
}
