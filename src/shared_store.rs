//! What a daemon does with a store that other daemons share (PostgreSQL, see
//! docs/scale-out.md): the run queue it claims from, its leases on sessions, and the relay that
//! carries approvals between daemons. With the embedded store this daemon is alone: the queue
//! refuses submissions (naming the setting), and there is nothing to claim, lease or relay.

use ryvos_actors::{copy_store, Store};
// Timestamps as the store writes them (milliseconds since the epoch).
pub use ryvos_actors::{now_ms, Change, Copied, Delivery, Relay, StoreError};
use ryvos_protocol::event::RunOutcome;
use ryvos_protocol::ids::{QueuedRunId, SessionId};
use ryvos_protocol::records::{PendingApproval, QueueState, QueuedRun, RunRecord, TurnCheckpoint};
use std::path::Path;
use std::time::Duration;
use tokio::sync::broadcast;

/// A handle on the store as daemons share it, from [`crate::Runtime::shared_store`]. Cheap to
/// clone.
#[derive(Clone)]
pub struct SharedStore(pub(crate) Store);

impl SharedStore {
    /// This daemon's name among those sharing the store; `None` when it is the store's only
    /// user.
    pub fn node(&self) -> Option<&str> {
        self.0.node()
    }

    /// What other daemons change, as they change it; `None` where there are none.
    pub fn changes(&self) -> Option<broadcast::Receiver<Change>> {
        self.0.changes()
    }

    /// The other daemons sharing the store that are alive.
    pub async fn peers(&self) -> Result<Vec<String>, StoreError> {
        self.0.peers().await
    }

    /// Sends `relay` to every daemon sharing the store.
    pub async fn relay(&self, relay: &Relay) -> Result<(), StoreError> {
        self.0.relay(relay).await
    }

    /// How many sessions this daemon holds leases on now.
    pub fn leases_held(&self) -> usize {
        self.0.leases_held()
    }

    /// Gives session `id` up: another daemon may take it at once.
    pub async fn release(&self, id: &SessionId) -> Result<(), StoreError> {
        self.0.release(id).await
    }

    /// Puts `run` in the queue; refused, naming the setting, without a shared store.
    pub async fn submit(&self, run: &QueuedRun) -> Result<(), StoreError> {
        self.0.submit_run(run).await
    }

    /// Claims up to `limit` runs for this daemon (queued ones, and ones whose daemon died),
    /// their sessions leased.
    pub async fn claim(&self, limit: usize) -> Result<Vec<QueuedRun>, StoreError> {
        self.0.claim_runs(limit).await
    }

    /// Puts run `id`, claimed by this daemon, back in the queue; one that did not start
    /// (`started` false) gives its attempt back.
    pub async fn hand_back(&self, id: &QueuedRunId, started: bool) -> Result<(), StoreError> {
        self.0.unclaim_run(id, started).await
    }

    /// Records how run `id` ended, if this daemon still owns it; whether it did.
    pub async fn finish(&self, id: &QueuedRunId, outcome: &RunOutcome) -> Result<bool, StoreError> {
        self.0.finish_run(id, outcome).await
    }

    /// Finishes the queued run whose run (`outcome`'s) parked and has now ended.
    pub async fn settle_parked(&self, outcome: &RunOutcome) -> Result<(), StoreError> {
        self.0.settle_parked_run(outcome).await
    }

    /// Every stored approval request: each is stored before anyone is asked, so in a shared
    /// store these are the whole cluster's, until answered.
    pub async fn approvals(&self) -> Result<Vec<PendingApproval>, StoreError> {
        self.0.paused_approvals().await
    }

    /// The queued run `id`, if there is one.
    pub async fn queued_run(&self, id: &QueuedRunId) -> Result<Option<QueuedRun>, StoreError> {
        self.0.queued_run(id).await
    }

    /// The queue's runs (in `state`, when given), the most recently submitted first.
    pub async fn queued_runs(
        &self,
        state: Option<QueueState>,
        limit: u32,
    ) -> Result<Vec<QueuedRun>, StoreError> {
        self.0.queued_runs(state, limit).await
    }

    /// How many runs wait in the queue; `None` without one.
    pub async fn queue_depth(&self) -> Result<Option<u64>, StoreError> {
        self.0.queue_depth().await
    }

    /// Session `id`'s runs, oldest first (a queued run's attempts are among them).
    pub async fn session_runs(&self, id: &SessionId) -> Result<Vec<RunRecord>, StoreError> {
        self.0.session_runs(id).await
    }

    /// Session `id`'s turn checkpoints, oldest first (how a run on another daemon progresses).
    pub async fn checkpoints(&self, id: &SessionId) -> Result<Vec<TurnCheckpoint>, StoreError> {
        self.0.checkpoints(id).await
    }
}

/// Copies the redb store at `path` (no daemon may hold it) into the empty PostgreSQL database
/// at `url`: every session, approval kept, cost total, memory and credential, in one
/// transaction (`ryvos store copy`).
pub async fn copy_into_postgres(path: &Path, url: &str) -> Result<Copied, StoreError> {
    let from = Store::open(path, true)?;
    // Known to the other daemons by this name while it copies.
    let name = format!("copy-{}", ulid::Ulid::new());
    let to = Store::connect(url, 4, true, Duration::from_secs(30), &name).await?;
    copy_store(&from, &to).await
}
