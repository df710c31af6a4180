//! How a session hands what it appended to the store, and moves on once it is durable.

use super::{SessionMsg, SessionState};
use crate::callback::Callback;
use crate::event::EventKind;
use crate::session::run::Phase;
use crate::store::{
    now_ms, RunRecord, SessionRecord, StoreError, TurnCheckpoint, Write, WriteBatch,
};
use ractor::ActorRef;

impl SessionState {
    /// Hands what the session appended, and the given records, to the store.
    pub(super) fn submit(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        checkpoint: Option<TurnCheckpoint>,
        run: Option<RunRecord>,
    ) {
        let mut batch = WriteBatch::new(self.id.clone());
        let messages = self.history.take_unsubmitted();
        let compaction = self.history.take_compaction();
        // After a failed commit the store refuses messages past what it lost, and the session
        // reloads from it before its next run: only the records go.
        if !self.needs_reload {
            batch
                .writes
                .extend(messages.into_iter().map(Write::Message));
            batch.writes.extend(checkpoint.map(Write::Checkpoint));
            batch.writes.extend(compaction.map(Write::Compaction));
        }
        let ended = run.as_ref().is_some_and(|r| r.status.is_some());
        batch.writes.extend(run.map(Write::Run));
        if let Some(active) = self.run.as_mut() {
            let verdicts = std::mem::take(&mut active.judging.unstored);
            batch
                .writes
                .extend(verdicts.into_iter().map(Write::Verdict));
            let run_id = active.id.clone();
            if ended {
                // The Guardian's view of a finished run is not needed again.
                batch.push(Write::Watch {
                    run_id,
                    watch: None,
                });
            } else if let Some(watch) = active.guardian_watch.take() {
                batch.push(Write::Watch {
                    run_id,
                    watch: Some(watch),
                });
            }
        }
        self.submit_batch(myself, batch);
    }

    pub(super) fn submit_batch(&mut self, myself: &ActorRef<SessionMsg>, mut batch: WriteBatch) {
        for write in &batch.writes {
            if let Write::Run(run) = write {
                if Some(&run.run_id) == self.last_run.as_ref() && run.status.is_some() {
                    self.last_status = run.status;
                }
            }
        }
        batch.push(Write::Session(SessionRecord {
            session_id: self.id.clone(),
            created_at_ms: self.created_at_ms,
            updated_at_ms: now_ms(),
            message_count: self.history.next_seq(),
            last_run: self.last_run.clone(),
            paused_calls: self.paused_calls.clone(),
            workspace: self.workspace.clone(),
            title: self.title.clone(),
            last_status: self.last_status,
        }));
        self.commits.submitted(batch.checkpoint().map(|c| c.turn));
        let me = myself.clone();
        let notify = Callback::new(
            move |result| {
                if me.cast(SessionMsg::Committed { result }).is_err() {
                    tracing::debug!("a commit was confirmed to a session that has stopped");
                }
            },
            || Err(crate::checkpoint::writer_gone()),
        );
        self.services.checkpoint.append(batch, notify);
    }

    pub(super) fn on_committed(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        result: Result<(), StoreError>,
    ) {
        let confirmation = self.commits.confirmed(result);
        if let Some(run) = &self.run {
            for turn in confirmation.durable_turns {
                run.events.emit(EventKind::CheckpointSaved { turn });
            }
        }
        if let Some(e) = confirmation.failure {
            tracing::error!(session = %self.id, "commit failed: {e}");
            self.needs_reload = true;
            // Ending an already-ending run is a no-op; any failure ends a run going on.
            self.fail(myself, format!("the turn could not be stored: {e}"));
        }
        self.advance(myself);
    }

    /// Moves on from a wait for durability, once everything submitted is durable.
    pub(super) fn advance(&mut self, myself: &ActorRef<SessionMsg>) {
        if !self.commits.all_confirmed() {
            return;
        }
        let Some(run) = self.run.as_mut() else { return };
        match &mut run.phase {
            Phase::AwaitingDurability { calls } => {
                let calls = std::mem::take(calls);
                self.dispatch_tools(myself, calls);
            }
            Phase::Finishing(_) => self.complete(myself),
            _ => {}
        }
    }
}
