//! What one session adds in one commit: a list of typed writes, each built by the domain it
//! belongs to (the session its turns, the ledger its totals, the gate its audit), and stored
//! together in one transaction.

use super::StoredMessage;
use crate::ids::{RunId, SessionId};
use ryvos_protocol::records::{
    AuditRecord, Compaction, CostTotals, MemoryEntry, PendingApproval, PlanRecord, RunRecord,
    RunWatch, SessionRecord, TurnCheckpoint, VerdictRecord,
};

/// One thing to store.
#[derive(Clone, Debug)]
pub enum Write {
    /// A message appended to the session's history.
    Message(StoredMessage),
    /// A completed turn.
    Checkpoint(TurnCheckpoint),
    /// A run's record, as it now stands.
    Run(RunRecord),
    /// The session's summary, as it now stands.
    Session(SessionRecord),
    /// The session's context window moved.
    Compaction(Compaction),
    /// Spending to add to the ledger's totals under `key`. Added, not overwritten, so that
    /// daemons sharing a store each add their own.
    Cost { key: String, add: CostTotals },
    /// The Guardian's view of a run, as it now stands (`None`: the run ended, forget it).
    Watch {
        run_id: RunId,
        watch: Option<RunWatch>,
    },
    /// A new memory, indexed as it is stored.
    Memory(MemoryEntry),
    /// One of the Judge's verdicts.
    Verdict(VerdictRecord),
    /// A Director run's plan and progress, as they now stand.
    Plan(PlanRecord),
    /// A decision of the security gate.
    Audit(AuditRecord),
    /// An approval request kept while its run is paused (`None`: done with, forget it).
    Approval {
        request_id: String,
        kept: Option<PendingApproval>,
    },
    /// A call a person approved "always" for the rest of the session.
    Always(String),
}

/// What one session adds in one commit.
#[derive(Clone, Debug)]
pub struct WriteBatch {
    pub session_id: SessionId,
    pub writes: Vec<Write>,
}

impl WriteBatch {
    /// An empty batch for `session_id`.
    pub fn new(session_id: SessionId) -> Self {
        Self {
            session_id,
            writes: Vec::new(),
        }
    }

    /// A batch of `writes` for `session_id`.
    pub fn of(session_id: SessionId, writes: impl IntoIterator<Item = Write>) -> Self {
        Self {
            session_id,
            writes: writes.into_iter().collect(),
        }
    }

    /// Adds `write`.
    pub fn push(&mut self, write: Write) {
        self.writes.push(write);
    }

    /// Whether there is nothing to store.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// The messages it appends, in order.
    pub fn messages(&self) -> impl Iterator<Item = &StoredMessage> {
        self.writes.iter().filter_map(|w| match w {
            Write::Message(m) => Some(m),
            _ => None,
        })
    }

    /// Where it moves the context window to, if it does.
    pub fn compaction(&self) -> Option<&Compaction> {
        self.writes.iter().rev().find_map(|w| match w {
            Write::Compaction(c) => Some(c),
            _ => None,
        })
    }

    /// The turn it completes, if it does.
    pub fn checkpoint(&self) -> Option<&TurnCheckpoint> {
        self.writes.iter().rev().find_map(|w| match w {
            Write::Checkpoint(c) => Some(c),
            _ => None,
        })
    }
}
