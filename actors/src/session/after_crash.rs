//! What a runtime alone on its store does as it starts, for the sessions a crash (a kill -9,
//! a power cut) left with a run that never ended: it asks about their calls in doubt at once
//! (kept in memory and in the store), so that `approvals` lists them before anyone resumes
//! the sessions; and it ends those runs `interrupted`, with the turns they stored, so that
//! `sessions` and `history` say what happened rather than show them in flight.
//!
//! With a store daemons share, nothing is done here: another daemon's sessions may be
//! running. A session is taken up when it is next loaded, or taken over.

use super::cut_off::{keep, CutOff};
use crate::config::InDoubt;
use crate::event::RunStatus;
use crate::ids::RunId;
use crate::security::Approvals;
use crate::store::{now_ms, RunRecord, SessionRecord, Store, StoreError, Write, WriteBatch};
use crate::tools::ToolRegistry;
use std::path::Path;

/// Why a run found unfinished as the runtime starts is ended.
const CUT_OFF: &str = "interrupted: the runtime stopped before this run ended (a crash or a \
                       kill); its stored turns are kept, and resuming the session goes on";

/// Takes up every session a crash cut off, as the module says.
pub(crate) async fn settle_at_start(
    store: &Store,
    registry: &ToolRegistry,
    approvals: &Approvals,
    in_doubt: InDoubt,
) -> Result<(), StoreError> {
    if store.node().is_some() {
        return Ok(());
    }
    for record in store.sessions().await? {
        // Ended, parked or interrupted runs end with a status; a crashed one has none.
        let (None, Some(last_run)) = (record.last_status, record.last_run.clone()) else {
            continue;
        };
        if in_doubt == InDoubt::Ask {
            ask_about_doubts(store, registry, approvals, &record, &last_run).await?;
        }
        settle(store, record).await?;
    }
    Ok(())
}

/// Asks about `record`'s calls in doubt, made by its run `last_run`.
async fn ask_about_doubts(
    store: &Store,
    registry: &ToolRegistry,
    approvals: &Approvals,
    record: &SessionRecord,
    last_run: &RunId,
) -> Result<(), StoreError> {
    let session = &record.session_id;
    let loaded = store.load_session_window(session).await?;
    let mut pending = record.paused_calls.clone();
    pending.extend(approvals.kept_calls(session));
    let cut_off = CutOff {
        session,
        registry,
        workspace: record.workspace.as_deref().map(Path::new),
        in_doubt: InDoubt::Ask,
        run: Some(last_run),
        servers: None,
    };
    let asking = (cut_off.find(store, &loaded.messages, &pending).await).in_doubt;
    if let Some(batch) = keep(approvals, session, asking) {
        store.write(&[batch]).await?;
    }
    Ok(())
}

/// Ends `record`'s unfinished runs `interrupted`, with the turns each stored.
async fn settle(store: &Store, record: SessionRecord) -> Result<(), StoreError> {
    let session = record.session_id.clone();
    let runs = store.session_runs(&session).await?;
    let checkpoints = store.checkpoints(&session).await?;
    let mut batch = WriteBatch::new(session.clone());
    for run in runs.into_iter().filter(|r| r.status.is_none()) {
        let turns: Vec<_> = (checkpoints.iter())
            .filter(|c| c.run_id == run.run_id)
            .collect();
        let ended = RunRecord {
            status: Some(RunStatus::Interrupted),
            reason: Some(CUT_OFF.to_owned()),
            turns: turns.iter().map(|c| c.turn).max().unwrap_or(run.turns),
            input_tokens: (turns.iter().map(|c| c.input_tokens).sum::<u64>()).max(run.input_tokens),
            output_tokens: (turns.iter().map(|c| c.output_tokens).sum::<u64>())
                .max(run.output_tokens),
            ended_at_ms: Some(now_ms()),
            ..run
        };
        tracing::warn!(
            session = %session,
            run = %ended.run_id,
            turns = ended.turns,
            "a run a crash cut off is ended interrupted"
        );
        batch.push(Write::Run(ended));
    }
    batch.push(Write::Session(SessionRecord {
        last_status: Some(RunStatus::Interrupted),
        ..record
    }));
    store.write(&[batch]).await
}
