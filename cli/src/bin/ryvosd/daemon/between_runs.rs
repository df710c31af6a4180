//! The socket's calls that change a session between its runs: undo its last compaction,
//! rewind it, fork it. A run in flight makes them `busy`; an unknown session `not_found`;
//! a point that cannot be gone back to a bad request, with the reason. And those that set up
//! what the next runs get: a workspace's hooks listed and trusted.

use super::Shared;
use ryvos::protocol::{
    CompactUndoResult, ErrorBody, ErrorCode, ForkParams, ForkResult, HooksListing, HooksParams,
    HooksTrusted, RewindParams, RewindResult,
};
use ryvos::{EngineError, RewindError, RuntimeError, UndoError};
use ryvos_protocol::ids::SessionId;

/// Undoes a session's last compaction.
pub async fn compact_undo(id: &SessionId, shared: &Shared) -> Result<CompactUndoResult, ErrorBody> {
    shared.runtime.undo_compaction(id).await.map_err(|e| {
        let code = match &e {
            RuntimeError::Engine(EngineError::Undo(undo)) => match undo {
                UndoError::NotFound(_) => ErrorCode::NotFound,
                UndoError::Busy(_) => ErrorCode::Busy,
                UndoError::Store(_) => ErrorCode::Internal,
                _ => ErrorCode::BadRequest,
            },
            _ => ErrorCode::Internal,
        };
        ErrorBody::new(code, e.to_string())
    })
}

/// Rewinds a session.
pub async fn rewind(params: RewindParams, shared: &Shared) -> Result<RewindResult, ErrorBody> {
    shared.runtime.rewind(params).await.map_err(refused)
}

/// Forks a session.
pub async fn fork(params: ForkParams, shared: &Shared) -> Result<ForkResult, ErrorBody> {
    shared.runtime.fork(params).await.map_err(refused)
}

/// The hooks runs in a workspace get.
pub async fn hooks(params: HooksParams, shared: &Shared) -> Result<HooksListing, ErrorBody> {
    shared.runtime.hooks(params).await.map_err(refused)
}

/// Trusts a workspace's hooks file as it is.
pub async fn trust_hooks(params: HooksParams, shared: &Shared) -> Result<HooksTrusted, ErrorBody> {
    shared.runtime.trust_hooks(params).await.map_err(refused)
}

fn refused(e: RuntimeError) -> ErrorBody {
    let code = match &e {
        RuntimeError::Engine(EngineError::Rewind(rewind)) => match rewind {
            RewindError::NotFound(_) => ErrorCode::NotFound,
            RewindError::Busy(_) | RewindError::Parked { .. } => ErrorCode::Busy,
            RewindError::Store(_) | RewindError::Files(_) => ErrorCode::Internal,
            _ => ErrorCode::BadRequest,
        },
        RuntimeError::BadRequest(_) | RuntimeError::Engine(EngineError::Hooks(_)) => {
            ErrorCode::BadRequest
        }
        _ => ErrorCode::Internal,
    };
    ErrorBody::new(code, e.to_string())
}
