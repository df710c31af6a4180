//! Session leases: which daemon runs a session, and the fence that keeps every other one out.
//!
//! A lease is a row `(session, owner, generation, expires_at)`. Taking it bumps the generation;
//! the owner renews it while it holds it; every write of a held session checks, in the write's
//! own transaction, that the row still carries this daemon's generation. A daemon that lost
//! its lease (paused, partitioned, presumed dead and taken over) can therefore never write
//! into a session another daemon took: its generation is gone. Rows are never deleted, so
//! generations only grow: a release lets the lease expire now.

use super::{PgContext, PostgresStore};
use crate::ids::SessionId;
use crate::store::{Lease, StoreError, WriteBatch};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// What this daemon knows of a session it leased.
#[derive(Clone, Copy, Debug)]
pub(super) struct Held {
    generation: i64,
    /// Released (or found lost) at this moment: writes are still fenced by its generation,
    /// and it is forgotten a while later.
    let_go: Option<Instant>,
    /// Another daemon took it: nothing more is written.
    lost: bool,
    /// Taken at this moment with a claim, without the session being told: the session's
    /// start is told by [`Leases::tell`], without taking it again.
    untold_since: Option<Instant>,
    /// Untold, and changed hands: what the session remembers may be stale until it is told.
    stale: bool,
}

/// How long a let-go lease is remembered for fencing stragglers.
const REMEMBERED: Duration = Duration::from_secs(600);

/// The sessions this daemon leased, by id.
#[derive(Default)]
pub(super) struct Leases {
    held: Mutex<HashMap<SessionId, Held>>,
    /// Written by a renewal from reading what is held until its renewal is stored, read by
    /// each release: a lease let go between the two would be renewed, and stay taken for a
    /// TTL. Releases do not wait for each other.
    renewing: tokio::sync::RwLock<()>,
}

impl Leases {
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Held>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The sessions of `batches` this daemon writes under a lease, with their generations.
    pub(super) fn fences(&self, batches: &[WriteBatch]) -> Vec<(String, i64)> {
        let held = self.held();
        let mut fences: Vec<(String, i64)> = batches
            .iter()
            .filter_map(|b| {
                let h = held.get(&b.session_id)?;
                Some((b.session_id.as_str().to_owned(), h.generation))
            })
            .collect();
        fences.sort();
        fences.dedup();
        fences
    }

    /// Records that this daemon took `id` at `generation`; whether the session changed hands
    /// since this daemon last held it (another daemon may have written to it meanwhile). With
    /// `untold`, the session is not told now: the next taking tells it.
    pub(super) fn record(&self, id: &SessionId, generation: i64, untold: bool) -> bool {
        let mut held = self.held();
        // Every taking adds one: nobody else wrote since this daemon last held the session
        // only if it held the generation just before this one.
        let continuous = held
            .get(id)
            .is_some_and(|h| h.generation + 1 == generation && !h.lost && !h.stale);
        held.insert(
            id.clone(),
            Held {
                generation,
                let_go: None,
                lost: false,
                untold_since: untold.then(Instant::now),
                stale: untold && !continuous,
            },
        );
        !continuous
    }

    /// The lease on `id` taken with a claim within `fresh` and not told yet, told now: the
    /// session that starts learns whether it changed hands, and nothing is asked of the
    /// database again. An older claim's lease may have lapsed unseen: it is taken anew.
    pub(super) fn tell(&self, id: &SessionId, fresh: Duration) -> Option<Lease> {
        let mut held = self.held();
        let h = held.get_mut(id).filter(|h| {
            let fresh_claim = h.untold_since.is_some_and(|at| at.elapsed() < fresh);
            fresh_claim && !h.lost && h.let_go.is_none()
        })?;
        h.untold_since = None;
        let changed_hands = std::mem::take(&mut h.stale);
        Some(Lease {
            generation: h.generation as u64,
            changed_hands,
        })
    }

    /// How many leases this daemon holds and has not let go.
    pub(super) fn live(&self) -> usize {
        self.held()
            .values()
            .filter(|h| h.let_go.is_none() && !h.lost)
            .count()
    }

    /// Marks `id` as taken over by another daemon.
    pub(super) fn mark_lost(&self, id: &SessionId) {
        if let Some(h) = self.held().get_mut(id) {
            h.lost = true;
            h.let_go.get_or_insert_with(Instant::now);
        }
    }

    /// Whether another daemon took `id` over from this one.
    pub(super) fn is_lost(&self, id: &SessionId) -> bool {
        self.held().get(id).is_some_and(|h| h.lost)
    }
}

/// How often leases lasting `ttl` are renewed; a claim's lease is trusted unseen for as long.
fn renewal_interval(ttl: Duration) -> Duration {
    ttl / 3
}

/// The error of a write into a session another daemon took over.
pub(super) fn taken_over(session: &SessionId) -> StoreError {
    StoreError::from_cause(
        format!("storing session {session}'s turn"),
        "another daemon took the session over (this daemon's lease on it lapsed); nothing more \
         is written to it from here",
    )
}

const TAKE: &str = "INSERT INTO leases (session_id, owner, generation, expires_at) \
    VALUES ($1, $2, 1, now() + $3 * interval '1 millisecond') \
    ON CONFLICT (session_id) DO UPDATE SET owner = EXCLUDED.owner, \
        generation = leases.generation + 1, expires_at = EXCLUDED.expires_at \
    WHERE leases.expires_at < now() OR leases.owner = EXCLUDED.owner \
    RETURNING generation";

const HOLDER: &str = "SELECT owner, greatest(0, extract(epoch FROM expires_at - now()))::float8 \
    FROM leases WHERE session_id = $1";

/// Renews the leases of `$3`/`$4` held by `$1`, locking them in session order (as the writes'
/// fences do), so that a renewal and a write never wait on each other in a circle.
const RENEW: &str = "WITH mine AS ( \
        SELECT l.session_id FROM leases l \
        JOIN unnest($3::text[], $4::bigint[]) AS held(session_id, generation) \
        ON l.session_id = held.session_id AND l.generation = held.generation \
        WHERE l.owner = $1 ORDER BY l.session_id FOR UPDATE OF l) \
    UPDATE leases SET expires_at = now() + $2 * interval '1 millisecond' \
    FROM mine WHERE leases.session_id = mine.session_id \
    RETURNING leases.session_id";

/// Says this daemon is alive, and reads the database's schema version (a newer Ryvos may have
/// migrated it since this one started).
const HEARTBEAT: &str = "WITH beat AS ( \
        INSERT INTO daemons (id, host, pid, started_at, seen_at) \
        VALUES ($1, $2, $3, now(), now()) ON CONFLICT (id) DO UPDATE SET seen_at = now()) \
    SELECT coalesce(max(version), 0) FROM ryvos_schema";

impl PostgresStore {
    /// Takes session `id` for this daemon, refused while another daemon's lease on it lives.
    pub(super) async fn take_lease(&self, id: &SessionId) -> Result<Lease, StoreError> {
        // A run claimed from the queue was leased with its claim, moments ago.
        if let Some(lease) = self.leases.tell(id, renewal_interval(self.lease_ttl)) {
            return Ok(lease);
        }
        let doing = || format!("taking the lease on session {id}");
        let client = self.pool.get().await.pg(doing)?;
        let Some(generation) = self.lease_in(&client, id).await? else {
            let holder = client.query_opt(HOLDER, &[&id.as_str()]).await.pg(doing)?;
            let (owner, secs) = holder
                .map(|r| (r.get::<_, String>(0), r.get::<_, f64>(1)))
                .unwrap_or_default();
            return Err(StoreError::from_cause(
                doing(),
                format!(
                    "daemon {owner} is running it (its lease ends in {secs:.0}s unless renewed); \
                     wait for that run, or follow it"
                ),
            ));
        };
        let changed_hands = self.leases.record(id, generation, false);
        Ok(Lease {
            generation: generation as u64,
            changed_hands,
        })
    }

    /// Takes session `id` for this daemon in `client`'s transaction: its new generation, or
    /// `None` while another daemon's lease on it lives.
    pub(super) async fn lease_in(
        &self,
        client: &impl deadpool_postgres::GenericClient,
        id: &SessionId,
    ) -> Result<Option<i64>, StoreError> {
        let ttl = self.lease_ttl.as_millis() as f64;
        let doing = || format!("taking the lease on session {id}");
        let take = client.prepare_cached(TAKE).await.pg(doing)?;
        let taken = client
            .query_opt(&take, &[&id.as_str(), &&*self.node, &ttl])
            .await
            .pg(doing)?;
        Ok(taken.map(|row| row.get(0)))
    }

    /// Lets the lease on `id` expire now; its generation still fences late writes.
    pub(super) async fn let_go(&self, id: &SessionId) -> Result<(), StoreError> {
        let doing = || format!("releasing the lease on session {id}");
        let _no_renewal = self.leases.renewing.read().await;
        let generation = {
            let mut held = self.leases.held();
            let Some(h) = held.get_mut(id) else {
                return Ok(());
            };
            h.let_go = Some(Instant::now());
            h.generation
        };
        let client = self.pool.get().await.pg(doing)?;
        client
            .execute(
                "UPDATE leases SET expires_at = now() \
                 WHERE session_id = $1 AND owner = $2 AND generation = $3",
                &[&id.as_str(), &&*self.node, &generation],
            )
            .await
            .pg(doing)?;
        Ok(())
    }
}

/// What renews a daemon's leases: the pool, who it is, and what it holds.
pub(super) struct Keeper {
    pub pool: super::Pg,
    pub node: Arc<str>,
    pub ttl: Duration,
    pub schema: Arc<super::schema::Watch>,
}

impl Keeper {
    /// Renews every lease held, says the daemon is alive, and marks the leases another daemon
    /// took as lost; forgets leases let go long ago, and relayed messages no one may read.
    pub(super) async fn renew(&self, leases: &Leases) -> Result<(), StoreError> {
        let doing = || "renewing this daemon's leases".to_string();
        let node: &str = &self.node;
        let client = self.pool.get().await.pg(doing)?;
        let host = hostname();
        let pid = std::process::id() as i64;
        let beat = client
            .query_one(HEARTBEAT, &[&node, &host, &pid])
            .await
            .pg(doing)?;
        self.schema.seen(beat.get(0));
        if let Err(e) = super::relay::prune(&client).await {
            // Old messages are refused as stale anyway: pruning can wait for the next beat.
            tracing::warn!("forgetting old relayed messages: {e}");
        }
        let _releases_wait = leases.renewing.write().await;
        let (ids, generations): (Vec<String>, Vec<i64>) = {
            let mut held = leases.held();
            held.retain(|_, h| h.let_go.is_none_or(|at| at.elapsed() < REMEMBERED));
            held.iter()
                .filter(|(_, h)| h.let_go.is_none() && !h.lost)
                .map(|(id, h)| (id.as_str().to_owned(), h.generation))
                .unzip()
        };
        if ids.is_empty() {
            return Ok(());
        }
        let ttl = self.ttl.as_millis() as f64;
        let rows = client
            .query(RENEW, &[&node, &ttl, &ids, &generations])
            .await
            .pg(doing)?;
        let renewed: std::collections::HashSet<String> = rows.iter().map(|r| r.get(0)).collect();
        let mut held = leases.held();
        let unrenewed = ids
            .iter()
            .zip(&generations)
            .filter(|(id, _)| !renewed.contains(*id));
        for (id, generation) in unrenewed {
            if let Some(h) = held.get_mut(&SessionId::new(id.as_str())) {
                // Taken again here meanwhile (a newer generation) is not lost.
                if h.let_go.is_none() && h.generation == *generation {
                    tracing::error!(session = %id, generation, "another daemon took over this session");
                    h.lost = true;
                    h.let_go = Some(Instant::now());
                }
            }
        }
        Ok(())
    }

    /// Renews `leases` three times per lease, until the store holding them is dropped.
    pub(super) fn spawn(self, leases: Weak<Leases>) {
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(renewal_interval(self.ttl));
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut failing = false;
            loop {
                ticks.tick().await;
                let Some(leases) = leases.upgrade() else {
                    return;
                };
                let renewed = self.renew(&leases).await;
                drop(leases);
                failing = report(renewed, failing);
            }
        });
    }
}

/// Logs a renewal's failure once, and its recovery; whether it is failing now.
fn report(renewed: Result<(), StoreError>, failing: bool) -> bool {
    match renewed {
        Ok(()) => {
            if failing {
                tracing::info!("leases renewed again");
            }
            false
        }
        Err(e) => {
            if !failing {
                tracing::error!("{e}; retrying");
            }
            true
        }
    }
}

/// This machine's name, for `ryvos status` across the cluster.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}
