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

/// Copies everything `from` holds into `to`, which must hold nothing: one transaction per
/// session (its history, runs, checkpoints, plan, audit trail, verdicts and Guardian records),
/// then the approvals kept, the cost totals and the memories. Refused, writing nothing, when
/// `to` already holds sessions, costs or memories.
pub async fn copy_store(from: &Store, to: &Store) -> Result<Copied, StoreError> {
    let refuse = |what: String| {
        StoreError::from_cause(
            "copying the store",
            format!("the target already holds {what}: copy into an empty database"),
        )
    };
    let held = to.sessions().await?.len();
    if held > 0 {
        return Err(refuse(format!("{held} session(s)")));
    }
    if !to.cost_totals_with_prefix("").await?.is_empty() {
        return Err(refuse("cost totals".into()));
    }
    if !to.memories().await?.is_empty() {
        return Err(refuse("memories".into()));
    }
    let mut copied = Copied::default();
    let always = from.always_allowed().await?;
    for record in from.sessions().await? {
        let id = record.session_id.clone();
        let mut writes = session_writes(from, &id, &mut copied).await?;
        for what in always.get(&id).into_iter().flatten() {
            writes.push(Write::Always(what.clone()));
        }
        to.write(&[WriteBatch::of(id, writes)]).await?;
        copied.sessions += 1;
    }
    let mut rest: Vec<WriteBatch> = Vec::new();
    for kept in from.paused_approvals().await? {
        let write = Write::Approval {
            request_id: kept.request_id.clone(),
            kept: Some(kept.clone()),
        };
        rest.push(WriteBatch::of(kept.session_id.clone(), [write]));
    }
    let costs = from.cost_totals_with_prefix("").await?;
    let memories = from.memories().await?;
    copied.memories = memories.len();
    // Batches are keyed by session; these records belong to none in particular.
    let none = SessionId::new("");
    rest.push(WriteBatch::of(
        none,
        costs
            .into_iter()
            .map(|(key, add)| Write::Cost { key, add })
            .chain(memories.into_iter().map(Write::Memory)),
    ));
    to.write(&rest).await?;
    Ok(copied)
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
