//! Calls a crash cut off: at the end of the stored history, without results, and not left
//! by a paused run. Each may or may not have taken effect; what becomes of it follows from
//! what it may do ([`crate::tools::Effect`]). All stay pending for the session's next run,
//! which takes them up first ([`crate::tool_executor`]: run again, or checked, with the same
//! idempotency key), except an unsafe call that started: it is in doubt, and with `[agent]
//! in_doubt = "ask"` a person is asked, through an approval request of kind `in_doubt`,
//! whether it may run again. With `tell_model`, or for a tool no longer offered, the call
//! gets a result saying it may or may not have run, as before.
//!
//! An unsafe call that no run's gate let through (no audit record allows it) never started:
//! nothing that changes anything runs before its decision is on record. It runs as any call
//! does.

use crate::config::InDoubt;
use crate::ids::{CallId, RunId, SessionId};
use crate::message::ToolCall;
use crate::security::approvals::{ApprovalKind, PendingApproval};
use crate::security::Approvals;
use crate::store::{now_ms, AuditRecord, Store, StoreError, StoredMessage, Write, WriteBatch};
use crate::tools::{Effect, ToolRegistry};
use std::path::Path;

/// What becomes of the calls a crash cut off.
#[derive(Default)]
pub(super) struct TakenUp {
    /// The calls the next run takes up (run again, checked, or asked about).
    pub pending: Vec<CallId>,
    /// The requests asking a person about the calls in doubt, to keep and store.
    pub in_doubt: Vec<PendingApproval>,
}

/// Where the cut-off calls are, and what decides about them.
pub(super) struct CutOff<'a> {
    pub session: &'a SessionId,
    pub registry: &'a ToolRegistry,
    /// The session's workspace, where a `bash` command that only reads is read-only.
    pub workspace: Option<&'a Path>,
    pub in_doubt: InDoubt,
    /// The runs the crash cut off (the latest made the requests asking about calls in doubt).
    pub runs: &'a [RunId],
}

impl CutOff<'_> {
    /// The calls at the end of `stored` without results, not in `pending` (a paused run's).
    pub(super) fn calls(&self, stored: &[StoredMessage], pending: &[CallId]) -> Vec<ToolCall> {
        let mut calls = unanswered_at_end(stored);
        calls.retain(|c| !pending.contains(&c.id));
        calls
    }

    /// `calls` taken up by what they may do; `audit` tells which started (unread: all did).
    pub(super) fn take_up(&self, calls: Vec<ToolCall>, audit: Option<&[AuditRecord]>) -> TakenUp {
        let mut taken = TakenUp::default();
        for call in calls {
            let Some(tool) = self.registry.get(&call.name) else {
                continue;
            };
            let Ok(input) = serde_json::from_str::<serde_json::Value>(&call.arguments) else {
                continue;
            };
            let effect = match self.workspace {
                Some(workspace) => crate::security::effect_of(tool.as_ref(), &input, workspace),
                None => tool.effect(&input),
            };
            // Let through by any run of the session: a run that took it up may have run it
            // again; a call id another call once had only makes a person asked once more.
            let started = || {
                audit.is_none_or(|audit| (audit.iter()).any(|a| a.call_id == call.id && a.allowed))
            };
            if effect == Effect::Unsafe && started() {
                match self.in_doubt {
                    InDoubt::TellModel => continue,
                    InDoubt::Ask => taken.in_doubt.push(self.asking(&call, input)),
                }
            }
            taken.pending.push(call.id);
        }
        taken
    }

    /// The request asking whether `call`, in doubt, may run again.
    fn asking(&self, call: &ToolCall, input: serde_json::Value) -> PendingApproval {
        let tier = self.registry.get(&call.name).map(|t| t.tier());
        PendingApproval {
            request_id: format!("ap_{}", ulid::Ulid::new().to_string().to_lowercase()),
            session_id: self.session.clone(),
            run_id: self
                .runs
                .last()
                .cloned()
                .unwrap_or_else(|| RunId::new("r_unknown")),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            input,
            tier: tier.unwrap_or(crate::tools::SafetyTier::T4),
            asked_at_ms: now_ms(),
            paused: true,
            answer: None,
            kind: ApprovalKind::InDoubt,
        }
    }
}

/// As a runtime alone on its store starts: the calls in doubt in the sessions a crash cut
/// off, asked about at once (kept in memory and in the store), so that `approvals` lists them
/// before anyone resumes their sessions. With a shared store each is found when its session
/// is next loaded instead: another daemon's sessions may be running.
pub(crate) async fn doubts_at_start(
    store: &Store,
    registry: &ToolRegistry,
    approvals: &Approvals,
    in_doubt: InDoubt,
) -> Result<(), StoreError> {
    if store.node().is_some() || in_doubt == InDoubt::TellModel {
        return Ok(());
    }
    for record in store.sessions().await? {
        // Ended, parked or interrupted runs end with a status; a crashed one has none.
        let (None, Some(last_run)) = (record.last_status, record.last_run.clone()) else {
            continue;
        };
        let session = &record.session_id;
        let loaded = store.load_session_window(session).await?;
        let mut pending = record.paused_calls.clone();
        pending.extend(approvals.kept_calls(session));
        let cut_off = CutOff {
            session,
            registry,
            workspace: record.workspace.as_deref().map(Path::new),
            in_doubt,
            runs: &[last_run],
        };
        let calls = cut_off.calls(&loaded.messages, &pending);
        if calls.is_empty() {
            continue;
        }
        let audit = store.audit(session).await.ok();
        let asking = cut_off.take_up(calls, audit.as_deref()).in_doubt;
        if asking.is_empty() {
            continue;
        }
        approvals.restore(asking.clone());
        let kept = asking.into_iter().map(|request| Write::Approval {
            request_id: request.request_id.clone(),
            kept: Some(request),
        });
        store
            .write(&[WriteBatch::of(session.clone(), kept)])
            .await?;
    }
    Ok(())
}

/// The calls of the last message that made calls, without results after it: what a crash
/// leaves (calls earlier in a history always have theirs).
fn unanswered_at_end(stored: &[StoredMessage]) -> Vec<ToolCall> {
    let Some(last) = (stored.iter()).rposition(|m| !m.message.tool_calls().is_empty()) else {
        return Vec::new();
    };
    let answered: Vec<&CallId> = (stored[last + 1..].iter())
        .filter_map(|m| match m.message.as_ref() {
            crate::message::Message::ToolResult { call_id, .. } => Some(call_id),
            _ => None,
        })
        .collect();
    let calls = stored[last].message.tool_calls();
    // Only at the very end: a later message means the conversation went on past them.
    let went_on = (stored[last + 1..].iter()).any(|m| {
        !matches!(
            m.message.as_ref(),
            crate::message::Message::ToolResult { .. }
        )
    });
    if went_on {
        return Vec::new();
    }
    (calls.iter())
        .filter(|c| !answered.contains(&&c.id))
        .cloned()
        .collect()
}
