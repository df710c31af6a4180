//! What agents remember across sessions.

use crate::ids::SessionId;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Something an agent chose to remember (`memory_write`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryEntry {
    pub id: String,
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The session that wrote it.
    pub session_id: SessionId,
    pub created_at_ms: u64,
    /// The content's vector, when embeddings are configured and answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<Vec<f32>>,
}
