//! A session's conversation as this process holds it: its history, what of it is durable, and
//! its record; how it is handed to the store and how it comes back from it.
//!
//! Between runs the session actor holds it; a run's driver takes it for the run's life and
//! hands it back at the end (a driver that fails loses it, and the restarted actor reloads it
//! from the store).

use super::commits::Commits;
use super::cut_off::{CutOff, TakenUp};
use super::history::History;
use super::notice::{NoticeRef, SessionNotice};
use super::recovery::{self, Reloaded};
use super::Services;
use crate::event::SessionEvents;
use crate::ids::{CallId, RunId, SessionId};
use crate::store::{now_ms, SessionRecord, TurnCheckpoint, Write, WriteBatch};
use ryvos_protocol::records::{LastRewind, ModelFit, RewindIntent};

/// See the module documentation.
pub(super) struct Conversation {
    pub id: SessionId,
    pub services: Services,
    pub events: SessionEvents,
    pub supervisor: NoticeRef,
    /// After a failure: the run that was in flight, and why it failed. It is ended with status
    /// `failed` and this reason once the session has reloaded.
    pub recover: Option<(RunId, String)>,
    pub history: History,
    /// Why the session could not be loaded, if it could not.
    pub load_error: Option<String>,
    /// A commit failed: the memory may be ahead of the store, so reload before the next run.
    pub needs_reload: bool,
    pub commits: Commits,
    created_at_ms: u64,
    pub last_run: Option<RunId>,
    /// The calls a paused run left pending, not yet taken up by another run.
    pub paused_calls: Vec<CallId>,
    /// The calls a crash cut off, pending for the next run to take up by their effect class.
    pub cut_off: Vec<crate::tool_executor::CutOffCall>,
    /// The workspace of the latest run, kept on the session's record.
    pub workspace: Option<String>,
    /// The session's first prompt, clipped, kept on its record.
    pub title: Option<String>,
    /// How the latest run ended, kept on the session's record.
    pub last_status: Option<crate::event::RunStatus>,
    /// What the session's model's server taught the runtime, kept on the session's record.
    pub model_fit: Option<ModelFit>,
    /// A rewind cut off by a crash, kept on the session's record: no run until it finishes.
    pub rewinding: Option<RewindIntent>,
    /// The last rewind, kept on the session's record for `rewind --undo`.
    pub last_rewind: Option<LastRewind>,
}

impl Conversation {
    /// A session not yet loaded.
    pub(super) fn new(
        id: SessionId,
        services: Services,
        events: SessionEvents,
        supervisor: NoticeRef,
        recover: Option<(RunId, String)>,
    ) -> Self {
        Self {
            id,
            services,
            events,
            supervisor,
            recover,
            history: History::default(),
            load_error: None,
            needs_reload: true,
            commits: Commits::default(),
            created_at_ms: now_ms(),
            last_run: None,
            paused_calls: Vec::new(),
            cut_off: Vec::new(),
            workspace: None,
            title: None,
            last_status: None,
            model_fit: None,
            rewinding: None,
            last_rewind: None,
        }
    }

    /// Hands `batch` (with the session's record) to the store; its confirmation comes back
    /// through [`Commits`].
    pub(super) fn submit_batch(&mut self, mut batch: WriteBatch) {
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
            measured: self.history.window_measure(),
            model_fit: self.model_fit.clone(),
            rewinding: self.rewinding.clone(),
            last_rewind: self.last_rewind.clone(),
        }));
        let notify = self.commits.submitted(batch.checkpoint().map(|c| c.turn));
        self.services.checkpoint.append(batch, notify);
    }

    /// Takes confirmations that came in between runs: a failure among them means the memory
    /// may be ahead of the store, so the session reloads before its next run.
    pub(super) fn settle_confirmations(&mut self) {
        while let Some(result) = self.commits.try_next() {
            if let Some(e) = self.commits.confirmed(result).failure {
                tracing::warn!(session = %self.id, "a commit failed between runs: {e}");
                self.needs_reload = true;
            }
        }
        // A failure left from between runs belongs to no run; the reload deals with the store.
        self.commits.take_error();
    }

    /// Reloads the session from the store, repairing what a crash left, and ends runs that
    /// were cut off: the one being recovered from a failure is reported to its subscribers.
    pub(super) async fn reload(&mut self) {
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
                    let why = format!("{why}; reloading the session failed: {e}");
                    self.report_recovered(run_id, &why, &[], now_ms()).await;
                }
                return self.load_error = Some(e);
            }
        };
        self.load_error = None;
        self.needs_reload = false;
        // Calls a paused run left stay pending; any other call without a result was cut off
        // (a crash, a failed actor, a lost commit), and is taken up as what it may do allows.
        let pending = self.pending_on_load(&loaded).await;
        self.history = History::load(
            loaded.messages,
            loaded.next_seq,
            loaded.compaction.as_ref(),
            &pending,
        );
        if let Some(record) = &loaded.record {
            // The server's last count sizes the window without the tokenizer.
            if let Some(kept) = &record.measured {
                self.history.restore_measure(kept);
            }
            self.created_at_ms = record.created_at_ms;
            self.last_run = record.last_run.clone();
            self.workspace = record.workspace.clone();
            self.title = record.title.clone();
            self.last_status = record.last_status;
            self.model_fit = record.model_fit.clone();
            self.rewinding = record.rewinding.clone();
            self.last_rewind = record.last_rewind.clone();
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
        let repaired = self.history.take_unsubmitted().into_iter();
        let mut batch = WriteBatch::of(self.id.clone(), repaired.map(Write::Message));
        batch.writes.extend(ended.pop().map(Write::Run));
        if !batch.is_empty() {
            self.submit_batch(batch);
        }
        for run in ended {
            self.submit_batch(WriteBatch::of(self.id.clone(), [Write::Run(run)]));
        }
    }

    /// The calls left without results on load, for the next run to take up: those a paused
    /// run left, and those a crash cut off as their effect class allows (the requests asking
    /// about calls in doubt are kept).
    async fn pending_on_load(&mut self, loaded: &crate::store::SessionHistory) -> Vec<CallId> {
        self.paused_calls = self.pending_calls(loaded.record.as_ref());
        let taken_up = self.take_up_cut_off(loaded).await;
        let mut pending = self.paused_calls.clone();
        pending.extend(taken_up.pending.iter().cloned());
        let mut cut_off = taken_up.pending;
        // Calls found in doubt before (as the runtime started) are taken up as such too.
        for call in self.services.approvals.in_doubt_calls(&self.id) {
            if !cut_off.contains(&call) {
                cut_off.push(call);
            }
        }
        self.cut_off = self.with_recorded_hooks(cut_off, taken_up.audit).await;
        let approvals = &self.services.approvals;
        if let Some(batch) = super::cut_off::keep(approvals, &self.id, taken_up.in_doubt) {
            self.submit_batch(batch);
        }
        pending
    }

    /// `cut_off` with what their hooks decided before the crash, from `audit` (the session's,
    /// read again only where taking the calls up did not read it).
    async fn with_recorded_hooks(
        &self,
        cut_off: Vec<CallId>,
        audit: Option<Vec<crate::store::AuditRecord>>,
    ) -> Vec<crate::tool_executor::CutOffCall> {
        let audit = match audit {
            Some(audit) => audit,
            None if cut_off.is_empty() => Vec::new(),
            None => (self.services.store.audit(&self.id).await).unwrap_or_else(|e| {
                // Unread, their hooks are asked again: they decide before anything runs.
                tracing::warn!(session = %self.id, "the audit could not be read: {e}");
                Vec::new()
            }),
        };
        (cut_off.into_iter())
            .map(|id| crate::tool_executor::CutOffCall {
                hooks: crate::security::recorded_hooks(&audit, &id),
                id,
            })
            .collect()
    }

    /// What becomes of the calls a crash cut off ([`super::cut_off`]).
    async fn take_up_cut_off(&self, loaded: &crate::store::SessionHistory) -> TakenUp {
        let record = loaded.record.as_ref();
        // The run that made them: the latest, cut off (or, taken up before, ended since).
        let run = (record.and_then(|r| r.last_run.as_ref()))
            .or(loaded.unfinished_runs.last().map(|r| &r.run_id));
        let cut_off = CutOff {
            session: &self.id,
            registry: &self.services.registry,
            workspace: record
                .and_then(|r| r.workspace.as_deref())
                .map(std::path::Path::new),
            in_doubt: self.services.agent.in_doubt,
            run,
            servers: Some(&self.services.mcp),
        };
        (cut_off.find(&self.services.store, &loaded.messages, &self.paused_calls)).await
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
    async fn flush_store(&self) -> Result<(), String> {
        crate::checkpoint::flush(&self.services.checkpoint)
            .await
            .map_err(|e| e.to_string())
    }

    /// Ends a run that failed with its actor: tells its subscribers, then the supervisor.
    async fn report_recovered(
        &self,
        run_id: &RunId,
        why: &str,
        turns: &[TurnCheckpoint],
        started_at_ms: u64,
    ) {
        let events = self.events.for_run(self.id.clone(), run_id.clone());
        let key = crate::cost_ledger::run_key(run_id);
        let cost = match self.services.store.cost_totals(&key).await {
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

    /// Tells the Guardian and the ledger a run is over, so they drop what they keep of it.
    pub(super) fn forget_run(&self, run_id: &RunId) {
        self.services.guardian.run_ended(run_id);
        self.services.ledger.run_ended(&self.id, run_id);
    }
}
