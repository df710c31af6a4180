//! Reading the redb store: each read from one snapshot, in the calling thread (the
//! [`Storage`](crate::store::Storage) methods call the scans on a blocking thread).

use super::tables::{
    ALWAYS, APPROVALS, AUDIT, CHECKPOINTS, COMPACTIONS, COSTS, GUARDIAN, MEMORIES, MESSAGES, PLANS,
    RUNS, SESSIONS, VERDICTS,
};
use super::{memory, RedbStore, FIRST, PAST_LAST};
use crate::ids::{RunId, SessionId};
use crate::store::{Context, SessionHistory, StoreError, StoredMessage};
use redb::ReadableTable;
use ryvos_protocol::records::{
    AuditRecord, CostTotals, MemoryEntry, PendingApproval, PlanRecord, RunRecord, RunWatch,
    SessionRecord, TurnCheckpoint, VerdictRecord,
};
use std::collections::{HashMap, HashSet};

impl RedbStore {
    /// The session's history: all of it, or only its context window.
    pub(super) fn load(
        &self,
        id: &SessionId,
        window_only: bool,
    ) -> Result<SessionHistory, StoreError> {
        let doing = || format!("loading session {id}");
        let txn = self.read(doing)?;
        let mut history = SessionHistory {
            compaction: COMPACTIONS.get(&txn, id.as_str(), doing)?,
            ..SessionHistory::default()
        };
        let first = match &history.compaction {
            Some(c) if window_only => c.first_kept_seq,
            _ => 0,
        };
        history.next_seq = next_seq(&txn, id)?;
        let window = (id.as_str(), first)..=(id.as_str(), u64::MAX);
        let rows = MESSAGES.entries_in(&txn, window, |(_, seq)| seq, doing)?;
        history.messages = rows
            .into_iter()
            .map(|(seq, row)| StoredMessage {
                seq,
                tokens: row.tokens,
                message: row.message,
            })
            .collect();
        history.record = SESSIONS.get(&txn, id.as_str(), doing)?;
        history.unfinished_runs = session_runs(&txn, id)?
            .into_iter()
            .filter(|r| r.status.is_none())
            .collect();
        Ok(history)
    }

    pub(super) fn read_next_seqs(
        &self,
        ids: &[SessionId],
    ) -> Result<HashMap<SessionId, u64>, StoreError> {
        let doing = || "reading where sessions go on".to_string();
        let txn = self.read(doing)?;
        let mut out = HashMap::new();
        for id in ids {
            let mut next = next_seq(&txn, id)?;
            if let Some(compaction) = COMPACTIONS.get(&txn, id.as_str(), doing)? {
                next = next.max(compaction.first_kept_seq);
            }
            out.insert(id.clone(), next);
        }
        Ok(out)
    }

    pub(super) fn read_session_record(
        &self,
        id: &SessionId,
    ) -> Result<Option<SessionRecord>, StoreError> {
        let doing = || format!("reading the record of session {id}");
        SESSIONS.get(&self.read(doing)?, id.as_str(), doing)
    }

    pub(super) fn read_session_runs(&self, id: &SessionId) -> Result<Vec<RunRecord>, StoreError> {
        session_runs(
            &self.read(|| format!("reading the runs of session {id}"))?,
            id,
        )
    }

    pub(super) fn read_sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        let doing = || "listing sessions".to_string();
        SESSIONS.all(&self.read(doing)?, doing)
    }

    pub(super) fn read_checkpoints(
        &self,
        id: &SessionId,
    ) -> Result<Vec<TurnCheckpoint>, StoreError> {
        let doing = || format!("reading the checkpoints of session {id}");
        let range = (id.as_str(), 0)..=(id.as_str(), u64::MAX);
        CHECKPOINTS.values(&self.read(doing)?, range, doing)
    }

    pub(super) fn read_plan(&self, id: &SessionId) -> Result<Option<PlanRecord>, StoreError> {
        let doing = || format!("reading the plan of session {id}");
        PLANS.get(&self.read(doing)?, id.as_str(), doing)
    }

    pub(super) fn read_audit(&self, id: &SessionId) -> Result<Vec<AuditRecord>, StoreError> {
        let doing = || format!("reading the audit trail of session {id}");
        let range = (id.as_str(), FIRST)..(id.as_str(), PAST_LAST);
        AUDIT.values(&self.read(doing)?, range, doing)
    }

    pub(super) fn read_paused_approvals(&self) -> Result<Vec<PendingApproval>, StoreError> {
        let doing = || "reading the approval requests of paused runs".to_string();
        APPROVALS.all(&self.read(doing)?, doing)
    }

    pub(super) fn read_always_allowed(
        &self,
    ) -> Result<HashMap<SessionId, HashSet<String>>, StoreError> {
        let doing = || "reading the calls approved for whole sessions".to_string();
        let txn = self.read(doing)?;
        let table = txn.open_table(ALWAYS).doing(doing)?;
        let mut out: HashMap<SessionId, HashSet<String>> = HashMap::new();
        for row in table.iter().doing(doing)? {
            let (key, _) = row.doing(doing)?;
            let (session, what) = key.value();
            out.entry(SessionId::new(session))
                .or_default()
                .insert(what.to_owned());
        }
        Ok(out)
    }

    pub(super) fn read_verdicts(&self, run: &RunId) -> Result<Vec<VerdictRecord>, StoreError> {
        let doing = || format!("reading the verdicts of run {run}");
        let range = (run.as_str(), 0)..=(run.as_str(), u32::MAX);
        VERDICTS.values(&self.read(doing)?, range, doing)
    }

    pub(super) fn read_cost_totals(&self, key: &str) -> Result<Option<CostTotals>, StoreError> {
        let doing = || format!("reading the cost totals of {key}");
        COSTS.get(&self.read(doing)?, key, doing)
    }

    pub(super) fn read_cost_totals_with_prefix(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, CostTotals)>, StoreError> {
        let doing = || format!("listing the cost totals under {prefix}");
        let end = format!("{prefix}{PAST_LAST}");
        let txn = self.read(doing)?;
        COSTS.entries_in(&txn, prefix..end.as_str(), str::to_owned, doing)
    }

    pub(super) fn read_guardian_watch(
        &self,
        run_id: &RunId,
    ) -> Result<Option<RunWatch>, StoreError> {
        let doing = || format!("reading the Guardian's record of run {run_id}");
        GUARDIAN.get(&self.read(doing)?, run_id.as_str(), doing)
    }

    pub(super) fn read_keyword_scores(
        &self,
        query: &str,
    ) -> Result<HashMap<String, f64>, StoreError> {
        memory::keyword_scores(&*self.db()?, query)
    }

    pub(super) fn read_memories_with_vectors(&self) -> Result<Vec<MemoryEntry>, StoreError> {
        let doing = || "reading the memories' vectors".to_string();
        let all = MEMORIES.all(&self.read(doing)?, doing)?;
        Ok(all.into_iter().filter(|e| e.embedding.is_some()).collect())
    }

    pub(super) fn read_memories(&self) -> Result<Vec<MemoryEntry>, StoreError> {
        let doing = || "reading the memories".to_string();
        MEMORIES.all(&self.read(doing)?, doing)
    }

    pub(super) fn read_memory(&self, id: &str) -> Result<Option<MemoryEntry>, StoreError> {
        let doing = || format!("reading memory {id}");
        MEMORIES.get(&self.read(doing)?, id, doing)
    }
}

/// One past the last message of session `id` stored (0 when there is none).
fn next_seq(txn: &redb::ReadTransaction, id: &SessionId) -> Result<u64, StoreError> {
    let doing = || format!("reading where session {id} goes on");
    let messages = txn.open_table(MESSAGES.definition()).doing(doing)?;
    let last = messages
        .range((id.as_str(), 0)..=(id.as_str(), u64::MAX))
        .doing(doing)?
        .next_back();
    Ok(match last {
        Some(row) => row.doing(doing)?.0.value().1 + 1,
        None => 0,
    })
}

fn session_runs(txn: &redb::ReadTransaction, id: &SessionId) -> Result<Vec<RunRecord>, StoreError> {
    let doing = || format!("reading the runs of session {id}");
    RUNS.values(txn, (id.as_str(), FIRST)..(id.as_str(), PAST_LAST), doing)
}
