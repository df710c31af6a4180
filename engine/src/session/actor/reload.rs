//! Bringing a session back: its history reloaded from the store (once the writer has caught
//! up), what a crash left repaired, and a run that failed with its actor reported.

use super::{SessionMsg, SessionState};
use crate::ids::{CallId, RunId};
use crate::session::history::History;
use crate::session::notice::SessionNotice;
use crate::session::recovery::{self, Reloaded};
use crate::store::{now_ms, SessionRecord, TurnCheckpoint, Write, WriteBatch};
use ractor::ActorRef;

impl SessionState {
    /// Reloads the session from the store, repairing what a crash left, and ends runs that
    /// were cut off: the one being recovered from a failure is reported to its subscribers.
    pub(super) async fn reload(&mut self, myself: &ActorRef<SessionMsg>) {
        let recover = self.recover.take();
        let loaded = match self.flush_store().await {
            Ok(()) => {
                recovery::load(
                    &self.services.store,
                    &self.id,
                    recover.as_ref().map(|(run, _)| run),
                )
                .await
            }
            Err(e) => Err(e),
        };
        let Reloaded {
            history: loaded,
            recovered_turns,
        } = match loaded {
            Ok(loaded) => loaded,
            Err(e) => {
                if let Some((run_id, why)) = &recover {
                    self.report_recovered(
                        run_id,
                        &format!("{why}; reloading the session failed: {e}"),
                        &[],
                        now_ms(),
                    )
                    .await;
                }
                return self.load_error = Some(e);
            }
        };
        self.load_error = None;
        self.needs_reload = false;
        // Calls a paused run left stay pending; any other call without a result was cut off
        // (a crash, a failed actor, a lost commit): it may have run, and gets a result saying so.
        self.paused_calls = self.pending_calls(loaded.record.as_ref());
        self.history = History::load(
            loaded.messages,
            loaded.next_seq,
            loaded.compaction.as_ref(),
            &self.paused_calls,
        );
        if let Some(record) = &loaded.record {
            self.created_at_ms = record.created_at_ms;
            self.last_run = record.last_run.clone();
            self.workspace = record.workspace.clone();
            self.title = record.title.clone();
            self.last_status = record.last_status;
        }
        if let Some((run_id, why)) = &recover {
            // Reported even when the run never reached the store: its subscribers need an end.
            let started_at_ms = loaded
                .unfinished_runs
                .iter()
                .find(|r| r.run_id == *run_id)
                .map_or_else(now_ms, |r| r.started_at_ms);
            self.report_recovered(run_id, why, &recovered_turns, started_at_ms)
                .await;
        }
        let mut ended = recovery::end_unfinished(loaded.unfinished_runs, recover.as_ref());
        // The repaired messages, and one run record per batch.
        let mut batch = WriteBatch::of(
            self.id.clone(),
            self.history
                .take_unsubmitted()
                .into_iter()
                .map(Write::Message),
        );
        batch.writes.extend(ended.pop().map(Write::Run));
        if !batch.is_empty() {
            self.submit_batch(myself, batch);
        }
        for run in ended {
            self.submit_batch(myself, WriteBatch::of(self.id.clone(), [Write::Run(run)]));
        }
    }

    /// The calls that stay pending on load: those a paused run left (on the session's record),
    /// and those whose approval request is kept. Such a call never ran: it waited for a person
    /// (through a crash, perhaps), and is asked again.
    fn pending_calls(&self, record: Option<&SessionRecord>) -> Vec<CallId> {
        let mut pending = record.map(|r| r.paused_calls.clone()).unwrap_or_default();
        for call in self.services.approvals.kept_calls(&self.id) {
            if !pending.contains(&call) {
                pending.push(call);
            }
        }
        pending
    }

    /// Waits until every batch handed to the store before now is committed, so a reload reads
    /// everything this session (or its failed predecessor) wrote.
    pub(super) async fn flush_store(&self) -> Result<(), String> {
        crate::checkpoint::flush(&self.services.checkpoint)
            .await
            .map_err(|e| e.to_string())
    }

    /// Ends a run that failed with its actor: tells its subscribers, then the supervisor.
    pub(super) async fn report_recovered(
        &self,
        run_id: &RunId,
        why: &str,
        turns: &[TurnCheckpoint],
        started_at_ms: u64,
    ) {
        let events = self.events.for_run(self.id.clone(), run_id.clone());
        let cost = match self
            .services
            .store
            .cost_totals(&crate::cost_ledger::run_key(run_id))
            .await
        {
            Ok(totals) => Some(totals.unwrap_or_default().cents()),
            Err(e) => {
                tracing::warn!(session = %self.id, "the cost of a failed run is unknown: {e}");
                None
            }
        };
        recovery::report_failed_run(&events, why, turns, cost, started_at_ms);
        self.forget_run(run_id);
        let done = SessionNotice::RunFinished {
            session_id: self.id.clone(),
            run_id: run_id.clone(),
        };
        if self.supervisor.send_message(done).is_err() {
            tracing::warn!(session = %self.id, "the session supervisor is gone");
        }
    }
}
