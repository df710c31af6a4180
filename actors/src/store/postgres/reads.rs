//! Reading the PostgreSQL store. A read that takes several statements runs them in one
//! repeatable-read transaction: one snapshot, as redb's reads.

use super::{PgContext, PostgresStore};
use crate::ids::{RunId, SessionId};
use crate::store::bm25::{self, Posting};
use crate::store::terms::terms;
use crate::store::{SessionHistory, StoreError, StoredMessage};
use deadpool_postgres::GenericClient;
use deadpool_postgres::Object;
use ryvos_protocol::records::{
    AuditRecord, Compaction, CostTotals, MemoryEntry, PendingApproval, PlanRecord, RunRecord,
    RunWatch, SessionRecord, TurnCheckpoint, VerdictRecord,
};
use ryvos_protocol::Message;
use serde::de::DeserializeOwned;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio_postgres::types::{FromSqlOwned, Json, ToSql};
use tokio_postgres::{IsolationLevel, Row};

const NEXT_SEQ: &str = "SELECT coalesce(max(seq) + 1, 0) FROM messages WHERE session_id = $1";

impl PostgresStore {
    async fn client(&self, doing: impl FnOnce() -> String) -> Result<Object, StoreError> {
        self.pool.get().await.pg(doing)
    }

    /// The rows `sql` returns.
    pub(super) async fn rows(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        doing: impl Fn() -> String,
    ) -> Result<Vec<Row>, StoreError> {
        let client = self.client(&doing).await?;
        let statement = client.prepare_cached(sql).await.pg(&doing)?;
        client.query(&statement, params).await.pg(&doing)
    }

    /// The records in column 0 of the rows `sql` returns.
    pub(super) async fn records<T: DeserializeOwned>(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        doing: impl Fn() -> String,
    ) -> Result<Vec<T>, StoreError> {
        let rows = self.rows(sql, params, &doing).await?;
        rows.iter().map(|row| column(row, 0, &doing)).collect()
    }

    /// The record in column 0 of the row `sql` returns, if it returns one.
    pub(super) async fn record<T: DeserializeOwned>(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        doing: impl Fn() -> String,
    ) -> Result<Option<T>, StoreError> {
        Ok(self.records(sql, params, doing).await?.into_iter().next())
    }

    /// The session's history: all of it, or only its context window.
    pub(super) async fn load(
        &self,
        id: &SessionId,
        window_only: bool,
    ) -> Result<SessionHistory, StoreError> {
        let doing = || format!("loading session {id}");
        let mut client = self.client(doing).await?;
        let txn = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .pg(doing)?;
        let sid = id.as_str();
        let compaction: Option<Compaction> = one(
            &txn,
            "SELECT record FROM compactions WHERE session_id = $1",
            &[&sid],
            doing,
        )
        .await?;
        let first = match &compaction {
            Some(c) if window_only => c.first_kept_seq as i64,
            _ => 0,
        };
        let rows = txn
            .query(
                "SELECT seq, tokens, message FROM messages \
                 WHERE session_id = $1 AND seq >= $2 ORDER BY seq",
                &[&sid, &first],
            )
            .await
            .pg(doing)?;
        let messages = rows
            .iter()
            .map(|row| {
                Ok(StoredMessage {
                    seq: value::<i64>(row, 0, doing)? as u64,
                    tokens: value::<i64>(row, 1, doing)? as u32,
                    message: column::<Arc<Message>>(row, 2, doing)?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let next_seq: i64 = value(&txn.query_one(NEXT_SEQ, &[&sid]).await.pg(doing)?, 0, doing)?;
        let record = one(
            &txn,
            "SELECT record FROM sessions WHERE session_id = $1",
            &[&sid],
            doing,
        )
        .await?;
        let unfinished = txn
            .query(
                "SELECT record FROM runs WHERE session_id = $1 AND NOT finished ORDER BY run_id",
                &[&sid],
            )
            .await
            .pg(doing)?;
        let unfinished_runs = unfinished
            .iter()
            .map(|row| column(row, 0, doing))
            .collect::<Result<_, _>>()?;
        txn.commit().await.pg(doing)?;
        Ok(SessionHistory {
            messages,
            next_seq: next_seq as u64,
            record,
            compaction,
            unfinished_runs,
        })
    }

    pub(super) async fn read_next_seqs(
        &self,
        ids: &[SessionId],
    ) -> Result<HashMap<SessionId, u64>, StoreError> {
        let doing = || "reading where sessions go on".to_string();
        let names: Vec<&str> = ids.iter().map(SessionId::as_str).collect();
        let rows = self
            .rows(
                "SELECT s.id, greatest( \
                     (SELECT coalesce(max(m.seq) + 1, 0) FROM messages m WHERE m.session_id = s.id), \
                     coalesce(c.first_kept_seq, 0)) \
                 FROM unnest($1::text[]) AS s(id) \
                 LEFT JOIN compactions c ON c.session_id = s.id",
                &[&names],
                doing,
            )
            .await?;
        rows.iter()
            .map(|row| {
                let id: String = value(row, 0, doing)?;
                let next: i64 = value(row, 1, doing)?;
                Ok((SessionId::new(id), next as u64))
            })
            .collect()
    }

    pub(super) async fn read_session_record(
        &self,
        id: &SessionId,
    ) -> Result<Option<SessionRecord>, StoreError> {
        let sql = "SELECT record FROM sessions WHERE session_id = $1";
        self.record(sql, &[&id.as_str()], || {
            format!("reading the record of session {id}")
        })
        .await
    }

    pub(super) async fn read_session_runs(
        &self,
        id: &SessionId,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let sql = "SELECT record FROM runs WHERE session_id = $1 ORDER BY run_id";
        self.records(sql, &[&id.as_str()], || {
            format!("reading the runs of session {id}")
        })
        .await
    }

    pub(super) async fn read_sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        let sql = "SELECT record FROM sessions ORDER BY session_id";
        self.records(sql, &[], || "listing sessions".to_string())
            .await
    }

    pub(super) async fn read_checkpoints(
        &self,
        id: &SessionId,
    ) -> Result<Vec<TurnCheckpoint>, StoreError> {
        let sql = "SELECT record FROM checkpoints WHERE session_id = $1 ORDER BY last_seq";
        self.records(sql, &[&id.as_str()], || {
            format!("reading the checkpoints of session {id}")
        })
        .await
    }

    pub(super) async fn read_plan(&self, id: &SessionId) -> Result<Option<PlanRecord>, StoreError> {
        let sql = "SELECT record FROM plans WHERE session_id = $1";
        self.record(sql, &[&id.as_str()], || {
            format!("reading the plan of session {id}")
        })
        .await
    }

    pub(super) async fn read_audit(&self, id: &SessionId) -> Result<Vec<AuditRecord>, StoreError> {
        let sql = "SELECT record FROM audit WHERE session_id = $1 ORDER BY id";
        self.records(sql, &[&id.as_str()], || {
            format!("reading the audit trail of session {id}")
        })
        .await
    }

    pub(super) async fn read_paused_approvals(&self) -> Result<Vec<PendingApproval>, StoreError> {
        let sql = "SELECT record FROM approvals ORDER BY request_id";
        self.records(sql, &[], || {
            "reading the approval requests of paused runs".to_string()
        })
        .await
    }

    pub(super) async fn read_always_allowed(
        &self,
    ) -> Result<HashMap<SessionId, HashSet<String>>, StoreError> {
        let doing = || "reading the calls approved for whole sessions".to_string();
        let rows = self
            .rows("SELECT session_id, what FROM always_allowed", &[], doing)
            .await?;
        let mut out: HashMap<SessionId, HashSet<String>> = HashMap::new();
        for row in &rows {
            let session: String = value(row, 0, doing)?;
            out.entry(SessionId::new(session))
                .or_default()
                .insert(value(row, 1, doing)?);
        }
        Ok(out)
    }

    pub(super) async fn read_verdicts(
        &self,
        run: &RunId,
    ) -> Result<Vec<VerdictRecord>, StoreError> {
        let sql = "SELECT record FROM verdicts WHERE run_id = $1 ORDER BY n";
        self.records(sql, &[&run.as_str()], || {
            format!("reading the verdicts of run {run}")
        })
        .await
    }

    pub(super) async fn read_cost_totals(
        &self,
        key: &str,
    ) -> Result<Option<CostTotals>, StoreError> {
        let doing = || format!("reading the cost totals of {key}");
        let sql = format!("SELECT {SUMMED_COSTS} FROM costs WHERE key = $1 GROUP BY key");
        let sql = sql.as_str();
        let rows = self.rows(sql, &[&key], doing).await?;
        rows.first()
            .map(|row| Ok(cost_totals(row, doing)?.1))
            .transpose()
    }

    pub(super) async fn read_cost_totals_with_prefix(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, CostTotals)>, StoreError> {
        let doing = || format!("listing the cost totals under {prefix}");
        let rows = self
            .rows(
                &format!(
                    "SELECT {SUMMED_COSTS} FROM costs WHERE starts_with(key, $1) \
                     GROUP BY key ORDER BY key"
                ),
                &[&prefix],
                doing,
            )
            .await?;
        rows.iter().map(|row| cost_totals(row, doing)).collect()
    }

    pub(super) async fn read_guardian_watch(
        &self,
        run_id: &RunId,
    ) -> Result<Option<RunWatch>, StoreError> {
        let sql = "SELECT watch FROM guardian WHERE run_id = $1";
        self.record(sql, &[&run_id.as_str()], || {
            format!("reading the Guardian's record of run {run_id}")
        })
        .await
    }

    /// BM25 over the memories PostgreSQL's text search finds (any query term in their
    /// `tsvector`, through its GIN index): the same ranking as the embedded store's, so that
    /// `relevance_floor` means the same on both.
    pub(super) async fn read_keyword_scores(
        &self,
        query: &str,
    ) -> Result<HashMap<String, f64>, StoreError> {
        let doing = || "reading the memory index".to_string();
        let mut seen = HashSet::new();
        let query_terms: Vec<String> = terms(query)
            .into_iter()
            .filter(|t| seen.insert(t.clone()))
            .collect();
        if query_terms.is_empty() {
            return Ok(HashMap::new());
        }
        let any_term = query_terms
            .iter()
            .map(|t| super::write::tsvector(std::iter::once(t)))
            .collect::<Vec<_>>()
            .join(" | ");
        let mut client = self.client(doing).await?;
        let txn = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .pg(doing)?;
        let totals = txn
            .query_one("SELECT memories, terms FROM memory_totals", &[])
            .await
            .pg(doing)?;
        let (docs, total_length): (i64, i64) =
            (value(&totals, 0, doing)?, value(&totals, 1, doing)?);
        if docs <= 0 {
            return Ok(HashMap::new());
        }
        let rows = txn
            .query(
                "SELECT id, term_counts, length FROM memories WHERE terms @@ $1::text::tsquery",
                &[&any_term],
            )
            .await
            .pg(doing)?;
        txn.commit().await.pg(doing)?;
        let mut postings: Vec<Vec<Posting>> = vec![Vec::new(); query_terms.len()];
        for row in &rows {
            let id: String = value(row, 0, doing)?;
            let counts: HashMap<String, u32> = column(row, 1, doing)?;
            let length: i64 = value(row, 2, doing)?;
            for (at, term) in query_terms.iter().enumerate() {
                if let Some(&tf) = counts.get(term) {
                    postings[at].push(Posting {
                        id: id.clone(),
                        tf,
                        length: length as u32,
                    });
                }
            }
        }
        let average_length = total_length as f64 / docs as f64;
        Ok(bm25::score(&postings, docs as u64, average_length)
            .into_iter()
            .map(|(id, s)| (id, bm25::normalized(s)))
            .collect())
    }

    pub(super) async fn read_memories_with_vectors(&self) -> Result<Vec<MemoryEntry>, StoreError> {
        let sql = "SELECT record FROM memories WHERE has_vector ORDER BY id";
        self.records(sql, &[], || "reading the memories' vectors".to_string())
            .await
    }

    pub(super) async fn read_memories(&self) -> Result<Vec<MemoryEntry>, StoreError> {
        let sql = "SELECT record FROM memories ORDER BY id";
        self.records(sql, &[], || "reading the memories".to_string())
            .await
    }

    pub(super) async fn read_memory(&self, id: &str) -> Result<Option<MemoryEntry>, StoreError> {
        let sql = "SELECT record FROM memories WHERE id = $1";
        self.record(sql, &[&id], || format!("reading memory {id}"))
            .await
    }
}

/// The record in column 0 of the one row `sql` returns in `client`, if it returns one.
async fn one<T: DeserializeOwned>(
    client: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
    doing: impl Fn() -> String,
) -> Result<Option<T>, StoreError> {
    match client.query_opt(sql, params).await.pg(&doing)? {
        Some(row) => column(&row, 0, doing).map(Some),
        None => Ok(None),
    }
}

/// Column `at` of `row`, a plain value.
fn value<T: FromSqlOwned>(
    row: &Row,
    at: usize,
    doing: impl Fn() -> String,
) -> Result<T, StoreError> {
    row.try_get(at).pg(doing)
}

/// A cost total: the sum of every daemon's row of it.
const SUMMED_COSTS: &str = "key, sum(calls)::bigint, sum(input_tokens)::bigint, \
    sum(output_tokens)::bigint, sum(cost_microcents)::bigint, sum(estimated_calls)::bigint";

/// A cost total as [`SUMMED_COSTS`] reads it: its key and totals.
fn cost_totals(row: &Row, doing: impl Fn() -> String) -> Result<(String, CostTotals), StoreError> {
    let count = |at| value::<i64>(row, at, &doing).map(|n| u64::try_from(n).unwrap_or(0));
    Ok((
        value(row, 0, &doing)?,
        CostTotals {
            calls: count(1)?,
            input_tokens: count(2)?,
            output_tokens: count(3)?,
            cost_microcents: count(4)?,
            estimated_calls: count(5)?,
        },
    ))
}

/// Column `at` of `row`, a record stored as JSON; a row that holds something else says which
/// record it is not.
fn column<T: DeserializeOwned>(
    row: &Row,
    at: usize,
    doing: impl Fn() -> String,
) -> Result<T, StoreError> {
    let Json(record) = row.try_get::<_, Json<T>>(at).pg(|| {
        let record = std::any::type_name::<T>()
            .rsplit("::")
            .next()
            .unwrap_or("record");
        format!("{}: a stored row is not a {record}", doing())
    })?;
    Ok(record)
}
