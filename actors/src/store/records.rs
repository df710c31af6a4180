//! The records the store keeps live in the protocol crate; the store adds the clock they are
//! stamped with.

pub(crate) use ryvos_protocol::records::{
    AuditRecord, Compaction, CostTotals, MemoryEntry, RunRecord, SessionRecord, TurnCheckpoint,
    VerdictRecord,
};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
