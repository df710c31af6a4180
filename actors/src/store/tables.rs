//! Every redb table, in one place. Values are JSON: readable with any tool, and the record types
//! can grow fields without a migration.

use redb::TableDefinition;

/// `(session_id, seq) -> StoredMessage`: the append-only history.
pub const MESSAGES: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("messages");

/// `(session_id, last_seq) -> TurnCheckpoint`: one record per completed turn.
pub const CHECKPOINTS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("checkpoints");

/// `(session_id, run_id) -> RunRecord`: run ids sort by time, so a session's runs are in order.
pub const RUNS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("runs");

/// `session_id -> SessionRecord`: the summary `ryvos sessions` lists.
pub const SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("sessions");

/// `key -> CostTotals`: spending per `run:<id>`, `session:<id>`, `day:YYYY-MM-DD` and
/// `month:YYYY-MM` (UTC), kept by the cost ledger.
pub const COSTS: TableDefinition<&str, &[u8]> = TableDefinition::new("costs");

/// `run_id -> RunWatch`: what the Guardian knows of a run in flight, so that a restarted
/// Guardian goes on where it stood.
pub const GUARDIAN: TableDefinition<&str, &[u8]> = TableDefinition::new("guardian");

/// `session_id -> Compaction`: where the session's context window starts, and the summary that
/// stands for the messages before it. The messages themselves stay.
pub const COMPACTIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("compactions");

/// `memory_id -> MemoryEntry`: what agents chose to remember, across sessions.
pub const MEMORIES: TableDefinition<&str, &[u8]> = TableDefinition::new("memories");

/// `(term, memory_id) -> tf << 32 | length`: the keyword index over memories, one posting per
/// term a memory holds (its count there, and the memory's length in terms, for BM25).
pub const MEMORY_TERMS: TableDefinition<(&str, &str), u64> = TableDefinition::new("memory_terms");

/// `"totals" -> [memories, terms]`: the collection's size, for BM25.
pub const MEMORY_STATS: TableDefinition<&str, &[u8]> = TableDefinition::new("memory_stats");

/// `(run_id, n) -> VerdictRecord`: every verdict the Judge gave a run, in order.
pub const VERDICTS: TableDefinition<(&str, u32), &[u8]> = TableDefinition::new("verdicts");

/// `session_id -> PlanRecord`: a Director run's plan and how far it got, so a crash resumes it.
pub const PLANS: TableDefinition<&str, &[u8]> = TableDefinition::new("plans");

/// `(session_id, decision id) -> AuditRecord`: every decision of the security gate.
pub const AUDIT: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("audit");

/// `request_id -> PendingApproval`: approval requests whose run paused while they waited.
pub const APPROVALS: TableDefinition<&str, &[u8]> = TableDefinition::new("approvals");

/// `(session_id, what) -> ()`: calls a person approved "always" for the rest of a session.
pub const ALWAYS: TableDefinition<(&str, &str), ()> = TableDefinition::new("always");
