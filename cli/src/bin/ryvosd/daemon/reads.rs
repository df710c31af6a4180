//! The daemon's reads that the socket and the console both answer: each once, with its
//! errors as the socket's.

use super::run_request::internal;
use super::Shared;
use ryvos::protocol::report::CostReport;
use ryvos::protocol::{ErrorBody, ErrorCode, HistoryResult};
use ryvos_protocol::ids::SessionId;
use ryvos_protocol::records::SessionRecord;

/// Every session, most recently updated first.
pub(super) async fn sessions(shared: &Shared) -> Result<Vec<SessionRecord>, ErrorBody> {
    shared.runtime.sessions().await.map_err(internal)
}

/// The month's spending against the limits.
pub(super) async fn cost(shared: &Shared) -> Result<CostReport, ErrorBody> {
    shared.runtime.cost_report().await.map_err(internal)
}

/// Everything stored of session `id`.
pub(super) async fn history(id: &SessionId, shared: &Shared) -> Result<HistoryResult, ErrorBody> {
    match shared.runtime.history(id).await {
        Ok(Some(history)) => Ok(history),
        Ok(None) => Err(ErrorBody::new(
            ErrorCode::NotFound,
            format!("there is no session {id}; `ryvos sessions` lists them"),
        )),
        Err(e) => Err(ErrorBody::new(ErrorCode::Internal, e.to_string())),
    }
}
