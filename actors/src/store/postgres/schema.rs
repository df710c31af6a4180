//! The schema, as numbered migrations applied at start. A database is at the version of the
//! last migration applied to it; one newer than this binary knows is refused (an older binary
//! must not write to tables it does not understand).
//!
//! Records are stored as `json`, like redb's values: they can grow fields without a migration.
//! Text keys that are listed in order use the "C" collation, so that they sort as bytes (run
//! ids and audit ids sort by time) whatever the database's locale.

use super::{Pg, PgContext};
use crate::store::StoreError;
use std::sync::atomic::{AtomicI32, Ordering};

/// Every migration, in order; migration `n` is `MIGRATIONS[n - 1]`.
const MIGRATIONS: &[&str] = &[
    // 1: the records redb keeps.
    r#"
    CREATE TABLE messages (
        session_id text COLLATE "C" NOT NULL,
        seq bigint NOT NULL,
        tokens bigint NOT NULL,
        message json NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE checkpoints (
        session_id text COLLATE "C" NOT NULL,
        last_seq bigint NOT NULL,
        record json NOT NULL,
        PRIMARY KEY (session_id, last_seq)
    );
    CREATE TABLE runs (
        session_id text COLLATE "C" NOT NULL,
        run_id text COLLATE "C" NOT NULL,
        finished boolean NOT NULL,
        record json NOT NULL,
        PRIMARY KEY (session_id, run_id)
    );
    CREATE TABLE sessions (session_id text COLLATE "C" PRIMARY KEY, record json NOT NULL);
    CREATE TABLE compactions (
        session_id text COLLATE "C" PRIMARY KEY,
        first_kept_seq bigint NOT NULL,
        record json NOT NULL
    );
    CREATE TABLE costs (key text COLLATE "C" PRIMARY KEY, totals json NOT NULL);
    CREATE TABLE guardian (run_id text COLLATE "C" PRIMARY KEY, watch json NOT NULL);
    CREATE TABLE memories (
        id text COLLATE "C" PRIMARY KEY,
        record json NOT NULL,
        has_vector boolean NOT NULL,
        terms tsvector NOT NULL,
        term_counts json NOT NULL,
        length bigint NOT NULL
    );
    CREATE INDEX memories_terms ON memories USING gin (terms);
    CREATE TABLE memory_totals (
        one boolean PRIMARY KEY DEFAULT true CHECK (one),
        memories bigint NOT NULL,
        terms bigint NOT NULL
    );
    INSERT INTO memory_totals VALUES (true, 0, 0);
    -- The collection's size for BM25, kept with every change of a memory.
    CREATE FUNCTION memory_totals_follow() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            UPDATE memory_totals SET memories = memories - 1, terms = terms - OLD.length;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            UPDATE memory_totals SET memories = memories + 1, terms = terms + NEW.length;
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER memory_totals_follow AFTER INSERT OR UPDATE OR DELETE ON memories
        FOR EACH ROW EXECUTE FUNCTION memory_totals_follow();
    CREATE TABLE verdicts (
        run_id text COLLATE "C" NOT NULL,
        n bigint NOT NULL,
        record json NOT NULL,
        PRIMARY KEY (run_id, n)
    );
    CREATE TABLE plans (session_id text COLLATE "C" PRIMARY KEY, record json NOT NULL);
    CREATE TABLE audit (
        id bigserial PRIMARY KEY,
        session_id text COLLATE "C" NOT NULL,
        record json NOT NULL
    );
    CREATE INDEX audit_by_session ON audit (session_id, id);
    CREATE TABLE approvals (request_id text COLLATE "C" PRIMARY KEY, record json NOT NULL);
    CREATE TABLE always_allowed (
        session_id text COLLATE "C" NOT NULL,
        what text NOT NULL,
        PRIMARY KEY (session_id, what)
    );
    "#,
    // 2: many daemons: who is alive, and who runs which session.
    r#"
    CREATE TABLE daemons (
        id text COLLATE "C" PRIMARY KEY,
        host text NOT NULL,
        pid bigint NOT NULL,
        started_at timestamptz NOT NULL,
        seen_at timestamptz NOT NULL
    );
    CREATE TABLE leases (
        session_id text COLLATE "C" PRIMARY KEY,
        owner text COLLATE "C" NOT NULL,
        generation bigint NOT NULL,
        expires_at timestamptz NOT NULL
    );
    CREATE INDEX leases_by_owner ON leases (owner);
    "#,
    // 3: the run queue.
    r#"
    CREATE TABLE run_queue (
        id text COLLATE "C" PRIMARY KEY,
        session_id text COLLATE "C" NOT NULL,
        params json NOT NULL,
        state text NOT NULL CHECK (state IN ('queued', 'running', 'finished')),
        owner text COLLATE "C",
        attempts integer NOT NULL,
        submitted_at_ms bigint NOT NULL,
        started_at_ms bigint,
        ended_at_ms bigint,
        outcome json
    );
    CREATE INDEX run_queue_waiting ON run_queue (submitted_at_ms, id) WHERE state <> 'finished';
    CREATE INDEX run_queue_by_time ON run_queue (submitted_at_ms DESC, id DESC);
    "#,
    // 4: cost totals as numbers, so that daemons add to them in place.
    r#"
    ALTER TABLE costs
        ADD COLUMN calls bigint NOT NULL DEFAULT 0,
        ADD COLUMN input_tokens bigint NOT NULL DEFAULT 0,
        ADD COLUMN output_tokens bigint NOT NULL DEFAULT 0,
        ADD COLUMN cost_microcents bigint NOT NULL DEFAULT 0,
        ADD COLUMN estimated_calls bigint NOT NULL DEFAULT 0;
    UPDATE costs SET
        calls = COALESCE((totals->>'calls')::bigint, 0),
        input_tokens = COALESCE((totals->>'input_tokens')::bigint, 0),
        output_tokens = COALESCE((totals->>'output_tokens')::bigint, 0),
        cost_microcents = COALESCE((totals->>'cost_microcents')::bigint, 0),
        estimated_calls = COALESCE((totals->>'estimated_calls')::bigint, 0);
    ALTER TABLE costs DROP COLUMN totals;
    "#,
    // 5: messages between daemons. NOTIFY needs no privilege, so it carries only a message's
    // id: what a message says is read from here, where only a role that may INSERT puts it.
    r#"
    CREATE TABLE relayed (
        id bigserial PRIMARY KEY,
        body json NOT NULL,
        sent_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX relayed_by_time ON relayed (sent_at);
    "#,
    // 6: cost totals kept per daemon and summed when read. Every model call adds to the
    // day's and the month's totals: one row for all daemons would make each daemon's commit
    // wait for the others' to release it.
    r#"
    ALTER TABLE costs ADD COLUMN writer text COLLATE "C" NOT NULL DEFAULT '';
    ALTER TABLE costs DROP CONSTRAINT costs_pkey;
    ALTER TABLE costs ADD PRIMARY KEY (key, writer);
    "#,
    // 7: a message's token count of 0 now means "not counted" (counts are made only near the
    // context's limits). Nothing changes in the tables; the new version keeps older daemons,
    // which would read 0 as 0 and never prune, from claiming runs.
    "SELECT 1",
    // 8: a queued run whose run parked at a budget waits in the queue as `parked`, until the
    // run is continued and ends.
    r#"
    ALTER TABLE run_queue DROP CONSTRAINT run_queue_state_check;
    ALTER TABLE run_queue ADD CONSTRAINT run_queue_state_check
        CHECK (state IN ('queued', 'running', 'finished', 'parked'));
    "#,
    // 9: who may use the HTTP door (tokens and console sessions, by hash), the approval links'
    // key, and the links already used.
    r#"
    CREATE TABLE credentials (
        id text COLLATE "C" PRIMARY KEY,
        record json NOT NULL,
        expires_ms bigint
    );
    CREATE INDEX credentials_expiring ON credentials (expires_ms) WHERE expires_ms IS NOT NULL;
    "#,
];

/// The schema version this binary writes.
pub(super) const LATEST: i32 = MIGRATIONS.len() as i32;

/// Brings the database up to [`LATEST`] in one transaction: all the missing migrations or
/// none. Many daemons starting together migrate once (an advisory lock makes them take turns).
pub(super) async fn migrate(pool: &Pg) -> Result<(), StoreError> {
    let doing = || "migrating the database's schema".to_string();
    let mut client = pool.get().await.pg(doing)?;
    let txn = client.transaction().await.pg(doing)?;
    // Any constant key: it only has to be the same in every Ryvos.
    txn.execute("SELECT pg_advisory_xact_lock(7395041923)", &[])
        .await
        .pg(doing)?;
    txn.batch_execute(
        "CREATE TABLE IF NOT EXISTS ryvos_schema (
            version integer NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now()
        )",
    )
    .await
    .pg(doing)?;
    let row = txn
        .query_one("SELECT coalesce(max(version), 0) FROM ryvos_schema", &[])
        .await
        .pg(doing)?;
    let current: i32 = row.get(0);
    if current > LATEST {
        return Err(StoreError::from_cause(
            doing(),
            format!(
                "the database is at schema version {current}, newer than this Ryvos knows \
                 ({LATEST}): a newer Ryvos wrote it; upgrade this one"
            ),
        ));
    }
    for (at, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        let version = at as i32 + 1;
        txn.batch_execute(sql)
            .await
            .pg(|| format!("applying schema migration {version}"))?;
        txn.execute(
            "INSERT INTO ryvos_schema (version) VALUES ($1)",
            &[&version],
        )
        .await
        .pg(doing)?;
    }
    txn.commit().await.pg(doing)
}

/// The database's schema version as the heartbeat last read it: a newer Ryvos may migrate
/// the database while this one runs (a one-by-one upgrade), and this one must then stop taking
/// work, since it would write tables it no longer understands.
#[derive(Default)]
pub(super) struct Watch(AtomicI32);

impl Watch {
    pub(super) fn seen(&self, version: i32) {
        let before = self.0.swap(version, Ordering::Relaxed);
        if version > LATEST && before <= LATEST {
            tracing::error!("{}", outdated(version));
        }
    }

    /// Why this daemon must not take work, while the database is newer than it.
    pub(super) fn refusal(&self) -> Option<String> {
        let version = self.0.load(Ordering::Relaxed);
        (version > LATEST).then(|| outdated(version))
    }
}

fn outdated(version: i32) -> String {
    format!(
        "a newer Ryvos migrated the database to schema version {version}; this one knows \
         {LATEST} and takes no more queued runs: upgrade it"
    )
}

#[cfg(test)]
/// The database's schema version (0 before the first migration).
pub(super) async fn version(pool: &Pg) -> Result<i32, StoreError> {
    let doing = || "reading the database's schema version".to_string();
    let client = pool.get().await.pg(doing)?;
    let row = client
        .query_one("SELECT coalesce(max(version), 0) FROM ryvos_schema", &[])
        .await
        .pg(doing)?;
    Ok(row.get(0))
}
