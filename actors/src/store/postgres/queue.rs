//! The run queue, in the database every daemon shares: submitted runs wait there until a
//! daemon with room claims them (`FOR UPDATE SKIP LOCKED`: daemons claiming at once never
//! take the same run, and never wait on each other), and a run whose daemon died is claimed
//! again once that daemon has been silent for a lease.

use super::{PgContext, PostgresStore};
use crate::ids::{QueuedRunId, SessionId};
use crate::store::{now_ms, StoreError};
use ryvos_protocol::event::RunOutcome;
use ryvos_protocol::records::{QueueState, QueuedRun};
use tokio_postgres::types::Json;
use tokio_postgres::Row;

/// The columns a [`QueuedRun`] is read from, in [`queued_run`]'s order.
const COLUMNS: &str = "id, session_id, params, state, owner, attempts, submitted_at_ms, \
    started_at_ms, ended_at_ms, outcome";

/// Claims up to `$2` runs for daemon `$1`: queued ones, and running ones whose daemon has not
/// been seen for a lease (`$3` ms). A run waits while any daemon (this one too: a run of its
/// own may be writing there) leases its session.
const CLAIM: &str = "WITH claimable AS ( \
        SELECT q.id FROM run_queue q \
        WHERE (q.state = 'queued' OR (q.state = 'running' AND q.owner <> $1 AND NOT EXISTS ( \
                SELECT 1 FROM daemons d \
                WHERE d.id = q.owner AND d.seen_at > now() - $3 * interval '1 millisecond'))) \
            AND NOT EXISTS ( \
                SELECT 1 FROM leases l WHERE l.session_id = q.session_id \
                    AND l.expires_at > now()) \
        ORDER BY q.submitted_at_ms, q.id \
        LIMIT $2 \
        FOR UPDATE SKIP LOCKED) \
    UPDATE run_queue q SET state = 'running', owner = $1, attempts = q.attempts + 1, \
        started_at_ms = coalesce(q.started_at_ms, $4) \
    FROM claimable c WHERE q.id = c.id \
    RETURNING q.id, q.session_id, q.params, q.state, q.owner, q.attempts, q.submitted_at_ms, \
        q.started_at_ms, q.ended_at_ms, q.outcome";

/// The runs waiting for a daemon, the queue's depth.
const DEPTH: &str = "SELECT count(*) FROM run_queue WHERE state = 'queued'";

impl PostgresStore {
    pub(super) async fn enqueue(&self, run: &QueuedRun) -> Result<(), StoreError> {
        let doing = || format!("submitting run {}", run.id);
        let client = self.pool.get().await.pg(doing)?;
        // One statement: the notification is delivered when it commits, and every daemon
        // listening wakes to claim the run.
        client
            .query(
                "WITH queued AS ( \
                    INSERT INTO run_queue (id, session_id, params, state, attempts, submitted_at_ms) \
                    VALUES ($1, $2, $3, 'queued', 0, $4) RETURNING id) \
                 SELECT pg_notify('ryvos_queue', id) FROM queued",
                &[
                    &run.id.as_str(),
                    &run.session_id.as_str(),
                    &Json(&run.params),
                    &(run.submitted_at_ms as i64),
                ],
            )
            .await
            .pg(doing)?;
        Ok(())
    }

    /// Claims up to `limit` runs, and leases their sessions in the same transaction.
    pub(super) async fn claim(&self, limit: usize) -> Result<Vec<QueuedRun>, StoreError> {
        let doing = || "claiming queued runs".to_string();
        if let Some(why) = self.schema.refusal() {
            return Err(StoreError::from_cause(doing(), why));
        }
        let mut client = self.pool.get().await.pg(doing)?;
        let txn = client.transaction().await.pg(doing)?;
        let silent = self.lease_ttl.as_millis() as f64;
        let rows = txn
            .query(
                CLAIM,
                &[&&*self.node, &(limit as i64), &silent, &(now_ms() as i64)],
            )
            .await
            .pg(doing)?;
        let mut claimed = Vec::with_capacity(rows.len());
        for row in &rows {
            let run = queued_run(row, doing)?;
            match self.lease_in(&txn, &run.session_id).await? {
                Some(generation) => claimed.push((run, generation)),
                // Leased meanwhile by a daemon that claimed another run of the session.
                None => {
                    txn.execute(
                        "UPDATE run_queue SET state = 'queued', attempts = attempts - 1 \
                         WHERE id = $1",
                        &[&run.id.as_str()],
                    )
                    .await
                    .pg(doing)?;
                }
            }
        }
        txn.commit().await.pg(doing)?;
        Ok(claimed
            .into_iter()
            .map(|(run, generation)| {
                self.leases.record(&run.session_id, generation, true);
                run
            })
            .collect())
    }

    /// Puts back in the queue the runs this daemon's id still owns from before it started (it
    /// was killed and came back within a lease: to the others it never looked dead).
    pub(super) async fn requeue_orphans(&self) -> Result<(), StoreError> {
        let doing = || "putting back the runs this daemon ran before it restarted".to_string();
        let client = self.pool.get().await.pg(doing)?;
        let orphans = client
            .execute(
                "UPDATE run_queue SET state = 'queued' WHERE owner = $1 AND state = 'running'",
                &[&&*self.node],
            )
            .await
            .pg(doing)?;
        if orphans > 0 {
            tracing::warn!(
                "{orphans} run(s) this daemon ran before it restarted go back in the queue"
            );
        }
        Ok(())
    }

    /// Puts run `id`, claimed by this daemon, back in the queue; one that did not start gives
    /// its attempt back.
    pub(super) async fn unclaim(&self, id: &QueuedRunId, started: bool) -> Result<(), StoreError> {
        let doing = || format!("putting run {id} back in the queue");
        let client = self.pool.get().await.pg(doing)?;
        let given_back: i32 = if started { 0 } else { 1 };
        client
            .query(
                "WITH back AS ( \
                    UPDATE run_queue SET state = 'queued', attempts = greatest(attempts - $3, 0) \
                    WHERE id = $1 AND owner = $2 AND state = 'running' RETURNING id) \
                 SELECT pg_notify('ryvos_queue', id) FROM back",
                &[&id.as_str(), &&*self.node, &given_back],
            )
            .await
            .pg(doing)?;
        Ok(())
    }

    /// Records how run `id` ended, if this daemon still owns it; whether it did.
    pub(super) async fn finish(
        &self,
        id: &QueuedRunId,
        outcome: &RunOutcome,
    ) -> Result<bool, StoreError> {
        let doing = || format!("recording the end of run {id}");
        let client = self.pool.get().await.pg(doing)?;
        // A run that parked waits as `parked` until it is continued and ends.
        let state = match outcome.status.is_end() {
            true => QueueState::Finished,
            false => QueueState::Parked,
        };
        let ended = client
            .query(
                "WITH ended AS ( \
                    UPDATE run_queue SET state = $5, ended_at_ms = $3, outcome = $4 \
                    WHERE id = $1 AND owner = $2 AND state = 'running' RETURNING id) \
                 SELECT pg_notify('ryvos_runs', id) FROM ended",
                &[
                    &id.as_str(),
                    &&*self.node,
                    &(now_ms() as i64),
                    &Json(outcome),
                    &state.as_str(),
                ],
            )
            .await
            .pg(doing)?;
        Ok(ended.len() == 1)
    }

    /// Finishes the queued run whose run (`outcome`'s) parked and has now ended.
    pub(super) async fn settle_parked(&self, outcome: &RunOutcome) -> Result<(), StoreError> {
        let doing = || format!("recording the end of parked run {}", outcome.run_id);
        let client = self.pool.get().await.pg(doing)?;
        client
            .query(
                "WITH settled AS ( \
                    UPDATE run_queue SET state = 'finished', ended_at_ms = $3, outcome = $4 \
                    WHERE session_id = $1 AND state = 'parked' AND outcome->>'run_id' = $2 \
                    RETURNING id) \
                 SELECT pg_notify('ryvos_runs', id) FROM settled",
                &[
                    &outcome.session_id.as_str(),
                    &outcome.run_id.as_str(),
                    &(now_ms() as i64),
                    &Json(outcome),
                ],
            )
            .await
            .pg(doing)?;
        Ok(())
    }

    pub(super) async fn list_queue(
        &self,
        state: Option<QueueState>,
        limit: u32,
    ) -> Result<Vec<QueuedRun>, StoreError> {
        let doing = || "listing the run queue".to_string();
        let client = self.pool.get().await.pg(doing)?;
        let sql = format!(
            "SELECT {COLUMNS} FROM run_queue WHERE $1::text IS NULL OR state = $1 \
             ORDER BY submitted_at_ms DESC, id DESC LIMIT $2"
        );
        let state = state.map(QueueState::as_str);
        let rows = client
            .query(&sql, &[&state, &i64::from(limit)])
            .await
            .pg(doing)?;
        rows.iter().map(|row| queued_run(row, doing)).collect()
    }

    pub(super) async fn find_queued(
        &self,
        id: &QueuedRunId,
    ) -> Result<Option<QueuedRun>, StoreError> {
        let doing = || format!("reading run {id} of the queue");
        let client = self.pool.get().await.pg(doing)?;
        let sql = format!("SELECT {COLUMNS} FROM run_queue WHERE id = $1");
        let row = client.query_opt(&sql, &[&id.as_str()]).await.pg(doing)?;
        row.map(|row| queued_run(&row, doing)).transpose()
    }

    pub(super) async fn depth(&self) -> Result<u64, StoreError> {
        let doing = || "counting the queued runs".to_string();
        let client = self.pool.get().await.pg(doing)?;
        let row = client.query_one(DEPTH, &[]).await.pg(doing)?;
        Ok(row.get::<_, i64>(0) as u64)
    }
}

/// A queue row as a [`QueuedRun`].
fn queued_run(row: &Row, doing: impl Fn() -> String) -> Result<QueuedRun, StoreError> {
    let state: String = row.try_get(3).pg(&doing)?;
    let state = QueueState::parse(&state).ok_or_else(|| {
        StoreError::from_cause(
            doing(),
            format!("a queued run has the unknown state {state}"),
        )
    })?;
    let Json(params) = row.try_get(2).pg(&doing)?;
    let outcome: Option<Json<RunOutcome>> = row.try_get(9).pg(&doing)?;
    let at = |i: usize| -> Result<Option<u64>, StoreError> {
        Ok(row
            .try_get::<_, Option<i64>>(i)
            .pg(&doing)?
            .map(|v| v as u64))
    };
    Ok(QueuedRun {
        id: QueuedRunId::new(row.try_get::<_, String>(0).pg(&doing)?),
        session_id: SessionId::new(row.try_get::<_, String>(1).pg(&doing)?),
        params,
        state,
        owner: row.try_get(4).pg(&doing)?,
        attempts: row.try_get::<_, i32>(5).pg(&doing)? as u32,
        submitted_at_ms: row.try_get::<_, i64>(6).pg(&doing)? as u64,
        started_at_ms: at(7)?,
        ended_at_ms: at(8)?,
        outcome: outcome.map(|Json(o)| o),
    })
}
