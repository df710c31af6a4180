//! Copying every record of one store into another, empty one: how a redb home moves into a
//! PostgreSQL database that daemons will share.

use super::{Store, StoreError, Write, WriteBatch};
use crate::ids::SessionId;

/// What a copy wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Copied {
    pub sessions: usize,
    pub messages: usize,
    pub runs: usize,
    pub memories: usize,
}

/// Copies everything `from` holds into `to`, which must hold nothing: every session (its
/// history, runs, checkpoints, plan, audit trail, verdicts and Guardian records), the
/// approvals kept, the cost totals and the memories, in one transaction, so that a copy that
/// fails leaves `to` as empty as it was; then the credentials (tokens, console sessions, the
/// approval links' key). Refused, writing nothing, when `to` already holds
/// any of these. The records are held in memory until they are written: about the size of
/// the home's store.
pub async fn copy_store(from: &Store, to: &Store) -> Result<Copied, StoreError> {
    refuse_unless_empty(to).await?;
    let mut copied = Copied::default();
    let mut batches: Vec<WriteBatch> = Vec::new();
    let always = from.always_allowed().await?;
    for record in from.sessions().await? {
        let id = record.session_id.clone();
        let mut writes = session_writes(from, &id, &mut copied).await?;
        for what in always.get(&id).into_iter().flatten() {
            writes.push(Write::Always(what.clone()));
        }
        batches.push(WriteBatch::of(id, writes));
        copied.sessions += 1;
    }
    for kept in from.paused_approvals().await? {
        let write = Write::Approval {
            request_id: kept.request_id.clone(),
            kept: Some(kept.clone()),
        };
        batches.push(WriteBatch::of(kept.session_id.clone(), [write]));
    }
    let costs = from.cost_totals_with_prefix("").await?;
    let memories = from.memories().await?;
    copied.memories = memories.len();
    // Batches are keyed by session; these records belong to none in particular.
    let none = SessionId::new("");
    batches.push(WriteBatch::of(
        none,
        costs
            .into_iter()
            .map(|(key, add)| Write::Cost { key, add })
            .chain(memories.into_iter().map(Write::Memory)),
    ));
    to.write(&batches).await?;
    // Tokens, the approval links' key and what they govern go along, so that programs and
    // links made for the old store work with the new one.
    let now = super::now_ms();
    for credential in from.credentials("").await? {
        if !credential.expired(now) && !to.add_credential(&credential).await? {
            return Err(StoreError::from_cause(
                "copying the store",
                format!("the target already holds credential {}", credential.id),
            ));
        }
    }
    Ok(copied)
}

/// Refuses a target that holds any record a copy writes.
async fn refuse_unless_empty(to: &Store) -> Result<(), StoreError> {
    let held = if !to.sessions().await?.is_empty() {
        "sessions"
    } else if !to.cost_totals_with_prefix("").await?.is_empty() {
        "cost totals"
    } else if !to.memories().await?.is_empty() {
        "memories"
    } else if !to.paused_approvals().await?.is_empty() {
        "kept approval answers"
    } else if !to.always_allowed().await?.is_empty() {
        "tools approved for a session"
    } else if !to.credentials("").await?.is_empty() {
        "credentials (tokens, console sessions, the approval links' key)"
    } else {
        return Ok(());
    };
    Err(StoreError::from_cause(
        "copying the store",
        format!("the target already holds {held}: copy into an empty database"),
    ))
}

/// Everything stored under session `id`, as writes.
async fn session_writes(
    from: &Store,
    id: &SessionId,
    copied: &mut Copied,
) -> Result<Vec<Write>, StoreError> {
    let history = from.load_session(id).await?;
    let mut writes: Vec<Write> = Vec::new();
    copied.messages += history.messages.len();
    writes.extend(history.messages.into_iter().map(Write::Message));
    writes.extend(history.record.map(Write::Session));
    writes.extend(history.compaction.map(Write::Compaction));
    for run in from.session_runs(id).await? {
        for verdict in from.verdicts(&run.run_id).await? {
            writes.push(Write::Verdict(verdict));
        }
        if let Some(watch) = from.guardian_watch(&run.run_id).await? {
            writes.push(Write::Watch {
                run_id: run.run_id.clone(),
                watch: Some(watch),
            });
        }
        writes.push(Write::Run(run));
        copied.runs += 1;
    }
    writes.extend(
        from.checkpoints(id)
            .await?
            .into_iter()
            .map(Write::Checkpoint),
    );
    writes.extend(from.plan(id).await?.map(Write::Plan));
    writes.extend(from.audit(id).await?.into_iter().map(Write::Audit));
    Ok(writes)
}
