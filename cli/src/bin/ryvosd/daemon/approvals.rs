//! Answers to approval requests. An answer this daemon is not waiting for is relayed to the
//! daemons sharing its store, and the one waiting delivers it and replies: a person may
//! answer through any daemon of the cluster.

use super::run_request::internal;
use super::Shared;
use ryvos::protocol::{AnswerParams, AnswerResult, ErrorBody, ErrorCode, MAX_BY_BYTES};
use ryvos::shared_store::{Change, Delivery, Relay};
use ryvos::{ApprovalError, PendingApproval};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

/// How long a relayed answer waits for the other daemons' replies.
const RELAY_PATIENCE: Duration = Duration::from_secs(5);

/// The calls waiting for a person's answer: this daemon's, and with a store other daemons
/// share, theirs too (every request is stored before anyone is asked), oldest first.
pub(super) async fn pending(shared: &Shared) -> Vec<PendingApproval> {
    let mut pending = shared.runtime.pending_approvals();
    let store = shared.runtime.shared_store();
    if store.node().is_some() {
        match store.approvals().await {
            Ok(stored) => {
                let known: HashSet<String> = pending.iter().map(|a| a.request_id.clone()).collect();
                pending.extend(
                    stored
                        .into_iter()
                        .filter(|a| !known.contains(&a.request_id)),
                );
                pending.sort_by_key(|a| a.asked_at_ms);
            }
            Err(e) => tracing::warn!("the other daemons' approval requests cannot be read: {e}"),
        }
    }
    pending
}

/// Answers `params` here, or through the daemon waiting for it.
pub(super) async fn answer(
    params: AnswerParams,
    approved: bool,
    shared: &Shared,
) -> Result<AnswerResult, ErrorBody> {
    let by = answerer(&params, approved)?;
    let by = by.as_str();
    let here = answer_here(&params, approved, by, shared).await;
    let answered = match here {
        Err(e @ ApprovalError::NotWaiting(_)) => {
            match relay(&params, approved, by, shared).await? {
                Delivery::Delivered => Ok(()),
                Delivery::NotWaiting => Err(e),
                Delivery::Failed(why) => return Err(ErrorBody::new(ErrorCode::Internal, why)),
            }
        }
        answered => answered,
    };
    match answered {
        Ok(()) => Ok(AnswerResult {
            request_id: params.request_id,
            approved,
        }),
        Err(e @ ApprovalError::NotStored(..)) => {
            Err(ErrorBody::new(ErrorCode::Internal, e.to_string()))
        }
        Err(e @ ApprovalError::AlreadyAnswered(_)) => {
            Err(ErrorBody::new(ErrorCode::BadRequest, e.to_string()))
        }
        Err(e) => Err(ErrorBody::new(ErrorCode::NotFound, e.to_string())),
    }
}

/// Who answered, as the audit and `ApprovalResolved` say it: the client's own `by`, else the
/// command line's words.
fn answerer(params: &AnswerParams, approved: bool) -> Result<String, ErrorBody> {
    match params.by.as_deref().map(str::trim) {
        None => Ok(if approved {
            "ryvos approve"
        } else {
            "ryvos deny"
        }
        .to_owned()),
        Some(by) if by.is_empty() || by.len() > MAX_BY_BYTES => Err(ErrorBody::new(
            ErrorCode::BadRequest,
            format!("params: `by` names who answers, in 1 to {MAX_BY_BYTES} bytes"),
        )),
        Some(by) => Ok(by.to_owned()),
    }
}

/// Gives the answer to a call of this daemon's waiting for it.
async fn answer_here(
    params: &AnswerParams,
    approved: bool,
    by: &str,
    shared: &Shared,
) -> Result<(), ApprovalError> {
    let answer = ryvos::Answer {
        approved,
        reason: params.reason.clone(),
        by: by.to_owned(),
        always: params.always,
    };
    shared.runtime.answer(&params.request_id, answer).await
}

/// Sends the answer to the other live daemons and waits until one delivers it, all say they
/// are not waiting for it, or [`RELAY_PATIENCE`] runs out (as good as not waiting).
async fn relay(
    params: &AnswerParams,
    approved: bool,
    by: &str,
    shared: &Shared,
) -> Result<Delivery, ErrorBody> {
    let store = shared.runtime.shared_store();
    let (Some(node), Some(mut changes)) = (store.node(), store.changes()) else {
        return Ok(Delivery::NotWaiting);
    };
    let mut silent: HashSet<String> = store.peers().await.map_err(internal)?.into_iter().collect();
    if silent.is_empty() {
        return Ok(Delivery::NotWaiting);
    }
    let token = ulid::Ulid::new().to_string();
    let relay = Relay::Answer {
        token: token.clone(),
        from: node.to_owned(),
        request_id: params.request_id.clone(),
        approved,
        always: params.always,
        reason: params.reason.clone(),
        by: by.to_owned(),
    };
    store.relay(&relay).await.map_err(internal)?;
    let replies = async {
        loop {
            match changes.recv().await {
                Ok(Change::Relay(Relay::Reply {
                    token: t,
                    to,
                    from,
                    delivered,
                })) if t == token && to == node => {
                    if delivered != Delivery::NotWaiting {
                        return delivered;
                    }
                    silent.remove(&from);
                    if silent.is_empty() {
                        return Delivery::NotWaiting;
                    }
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return Delivery::NotWaiting,
            }
        }
    };
    match tokio::time::timeout(RELAY_PATIENCE, replies).await {
        Ok(delivered) => Ok(delivered),
        // Silent daemons may be waiting for it and slow: saying "not waiting" could be wrong.
        Err(_) => Err(ErrorBody::new(
            ErrorCode::Internal,
            format!(
                "request {} is not waiting on this daemon, and daemon(s) {} did not answer \
                 within {}s whether they are waiting for it; ask again (an answer that did \
                 arrive is then reported as already answered)",
                params.request_id,
                silent.into_iter().collect::<Vec<_>>().join(", "),
                RELAY_PATIENCE.as_secs()
            ),
        )),
    }
}

/// Delivers the answers other daemons relay until the daemon stops; `None` when no other
/// daemon shares the store.
pub(super) fn spawn(shared: Arc<Shared>) -> Option<tokio::task::JoinHandle<()>> {
    let store = shared.runtime.shared_store();
    let node = store.node()?.to_owned();
    let mut changes = store.changes()?;
    Some(tokio::spawn(async move {
        loop {
            let change = tokio::select! {
                () = shared.shutdown.cancelled() => break,
                change = changes.recv() => change,
            };
            match change {
                Ok(Change::Relay(Relay::Answer {
                    token,
                    from,
                    request_id,
                    approved,
                    always,
                    reason,
                    by,
                })) if from != node => {
                    let params = AnswerParams {
                        request_id,
                        reason,
                        always,
                        by: None,
                    };
                    let delivered = match answer_here(&params, approved, &by, &shared).await {
                        Ok(()) => Delivery::Delivered,
                        Err(ApprovalError::NotWaiting(_)) => Delivery::NotWaiting,
                        Err(e) => Delivery::Failed(e.to_string()),
                    };
                    let reply = Relay::Reply {
                        token,
                        from: node.clone(),
                        to: from,
                        delivered,
                    };
                    if let Err(e) = shared.runtime.shared_store().relay(&reply).await {
                        tracing::warn!("replying to a relayed approval answer: {e}");
                    }
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => break,
            }
        }
    }))
}
