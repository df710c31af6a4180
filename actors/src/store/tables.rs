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
