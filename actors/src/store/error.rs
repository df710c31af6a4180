//! What a storage failure says.

use std::sync::Arc;

/// A storage failure, saying what was being done. Cloneable so that one failed group commit
/// can be reported to every session that was waiting on it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{doing}: {cause}")]
pub struct StoreError {
    doing: String,
    cause: Arc<str>,
}

impl StoreError {
    /// An error from `doing` caused by `cause`.
    pub fn from_cause(doing: impl Into<String>, cause: impl std::fmt::Display) -> Self {
        Self {
            doing: doing.into(),
            cause: cause.to_string().into(),
        }
    }
}

/// Names what was being done when a fallible step failed.
pub(crate) trait Context<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, StoreError>;
}

impl<T, E: std::fmt::Display> Context<T> for Result<T, E> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, StoreError> {
        self.map_err(|e| StoreError::from_cause(what(), e))
    }
}
