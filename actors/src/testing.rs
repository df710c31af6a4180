//! What tests, benchmarks and fuzz targets reach into. Not part of the engine's API: built
//! only with the `testing` feature.

pub use crate::context::prune_to_budget;
pub use crate::cost_ledger::{LedgerAnswer, LedgerHold, Period};
pub use crate::provider::decode::{decode_body, WireFormat};
pub use crate::provider::{AssistantResponse, ResponseAssembler};
pub use crate::root::{ChildKind, SupervisorNotice};
pub use crate::security::shell::parse as parse_shell;
pub use crate::session::History;
pub use crate::store::{fail_store_writes, now_ms, repair, StoredMessage, Write, WriteBatch};
pub use crate::tokens::{
    asked_for as tokenizer_asked_for, count_message, count_text, warm_up as warm_up_tokenizer,
};
pub use crate::tools::{builtin, ToolRegistry};

/// How many exact facts a compaction finds in `messages` (see the context's facts).
pub fn extract_facts(messages: &[std::sync::Arc<crate::message::Message>]) -> usize {
    crate::context::facts::extract(messages).len()
}
