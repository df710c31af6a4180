//! What a runtime alone on its store does as it starts, for the sessions a crash (a kill -9,
//! a power cut) left with a run that never ended: it asks about their calls in doubt at once
//! (kept in memory and in the store), so that `approvals` lists them before anyone resumes
//! the sessions; and it ends those runs `interrupted`, with the turns they stored, so that
//! `sessions` and `history` say what happened rather than show them in flight.
//!
//! With a store daemons share, nothing is done here: another daemon's sessions may be
//! running. A session is taken up when it is next loaded, or taken over.

use super::cut_off::{keep, CutOff};
use super::recovery::{totals, CUT_OFF};
use crate::config::InDoubt;
use crate::event::RunStatus;
use crate::security::Approvals;
use crate::store::{now_ms, RunRecord, SessionRecord, Store, StoreError, Write, WriteBatch};
use crate::tools::ToolRegistry;
use std::path::Path;

/// Takes up every session a crash cut off, as the module says: its window and its turns read
/// once, and what becomes of it written in one batch.
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
        let (None, Some(_)) = (record.last_status, &record.last_run) else {
            continue;
        };
        let loaded = store.load_session_window(&record.session_id).await?;
        let mut batch = WriteBatch::new(record.session_id.clone());
        if in_doubt == InDoubt::Ask {
            let asked = ask_about_doubts(store, (registry, approvals), &record, &loaded.messages);
            batch.writes.extend(asked.await.writes);
        }
        let checkpoints = store.checkpoints(&record.session_id).await?;
        batch
            .writes
            .extend(settled(loaded.unfinished_runs, &checkpoints));
        batch.push(Write::Session(SessionRecord {
            last_status: Some(RunStatus::Interrupted),
            ..record
        }));
        store.write(&[batch]).await?;
    }
    Ok(())
}

/// The requests asking about `record`'s calls in doubt, among `messages`, kept in
/// `approvals`; the writes that store them.
async fn ask_about_doubts(
    store: &Store,
    (registry, approvals): (&ToolRegistry, &Approvals),
    record: &SessionRecord,
    messages: &[crate::store::StoredMessage],
) -> WriteBatch {
    let session = &record.session_id;
    let mut pending = record.paused_calls.clone();
    pending.extend(approvals.kept_calls(session));
    let cut_off = CutOff {
        session,
        registry,
        workspace: record.workspace.as_deref().map(Path::new),
        in_doubt: InDoubt::Ask,
        run: record.last_run.as_ref(),
        servers: None,
    };
    let asking = (cut_off.find(store, messages, &pending).await).in_doubt;
    keep(approvals, session, asking).unwrap_or_else(|| WriteBatch::new(session.clone()))
}

/// `unfinished` runs ended `interrupted`, with the turns each stored among `checkpoints`.
fn settled(
    unfinished: Vec<RunRecord>,
    checkpoints: &[crate::store::TurnCheckpoint],
) -> impl Iterator<Item = Write> + '_ {
    unfinished.into_iter().map(move |run| {
        let of_run = checkpoints.iter().filter(|c| c.run_id == run.run_id);
        let (turn, input, output) = totals(of_run);
        let ended = RunRecord {
            status: Some(RunStatus::Interrupted),
            reason: Some(CUT_OFF.to_owned()),
            turns: turn.max(run.turns),
            input_tokens: input.max(run.input_tokens),
            output_tokens: output.max(run.output_tokens),
            ended_at_ms: Some(now_ms()),
            ..run
        };
        tracing::warn!(
            session = %ended.session_id,
            run = %ended.run_id,
            turns = ended.turns,
            "a run a crash cut off is ended interrupted"
        );
        Write::Run(ended)
    })
}
