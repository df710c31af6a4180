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
use crate::mcp::McpServers;
use crate::message::{Message, ToolCall};
use crate::security::approvals::{ApprovalKind, PendingApproval};
use crate::security::Approvals;
use crate::store::repair;
use crate::store::{now_ms, AuditRecord, Store, StoredMessage, Write, WriteBatch};
use crate::tools::{Effect, SafetyTier, ToolRegistry};
use std::path::Path;

/// What becomes of the calls a crash cut off.
#[derive(Default)]
pub(super) struct TakenUp {
    /// The calls the next run takes up (run again, checked, or asked about).
    pub pending: Vec<CallId>,
    /// The requests asking a person about the calls in doubt, to keep and store.
    pub in_doubt: Vec<PendingApproval>,
    /// The session's audit, when it was read (there were calls to take up).
    pub audit: Option<Vec<AuditRecord>>,
}

/// Where the cut-off calls are, and what decides about them.
pub(super) struct CutOff<'a> {
    pub session: &'a SessionId,
    pub registry: &'a ToolRegistry,
    /// The session's workspace, where a `bash` command that only reads is read-only.
    pub workspace: Option<&'a Path>,
    pub in_doubt: InDoubt,
    /// The run that made the calls, which the requests about calls in doubt name.
    pub run: Option<&'a RunId>,
    /// The MCP servers, waited for while starting when a call names a tool not offered yet
    /// (the daemon just came back); `None` where they are not started yet.
    pub servers: Option<&'a McpServers>,
}

impl CutOff<'_> {
    /// The calls at the end of `stored` without results, not in `pending` (a paused run's),
    /// taken up; `store`'s audit tells which started, read only when there are some.
    pub(super) async fn find(
        &self,
        store: &Store,
        stored: &[StoredMessage],
        pending: &[CallId],
    ) -> TakenUp {
        let mut calls = unanswered_at_end(stored);
        calls.retain(|c| !pending.contains(&c.id));
        if calls.is_empty() {
            return TakenUp::default();
        }
        if let Some(servers) = self.servers {
            if (calls.iter()).any(|c| self.registry.get(&c.name).is_none()) {
                servers.settled().await;
            }
        }
        let audit = match store.audit(self.session).await {
            Ok(audit) => Some(audit),
            Err(e) => {
                // Unread, every unsafe call counts as started: asked about, never repeated.
                tracing::warn!(session = %self.session, "the audit could not be read: {e}");
                None
            }
        };
        let taken = self.take_up(calls, audit.as_deref());
        TakenUp { audit, ..taken }
    }

    /// `calls` taken up by what they may do; `audit` tells which started (unread: all did).
    fn take_up(&self, calls: Vec<ToolCall>, audit: Option<&[AuditRecord]>) -> TakenUp {
        let mut taken = TakenUp::default();
        for call in calls {
            let Some(tool) = self.registry.get(&call.name) else {
                continue;
            };
            let Ok(given) = serde_json::from_str::<serde_json::Value>(&call.arguments) else {
                continue;
            };
            // Let through by any run of the session: a run that took it up may have run it
            // again; a call id another call once had only makes a person asked once more.
            let let_through =
                audit.map(|audit| (audit.iter()).rfind(|a| a.call_id == call.id && a.allowed));
            // What ran: the input its hooks gave it, if they changed the model's.
            let ran = let_through
                .flatten()
                .and_then(crate::security::input_that_ran);
            let input = ran.unwrap_or(given);
            let effect = match self.workspace {
                Some(workspace) => crate::security::effect_of(tool.as_ref(), &input, workspace),
                None => tool.effect(&input),
            };
            if effect == Effect::Unsafe && let_through.is_none_or(|a| a.is_some()) {
                match self.in_doubt {
                    InDoubt::TellModel => continue,
                    InDoubt::Ask => {
                        let asking = self.asking(&call, input, tool.tier());
                        taken.in_doubt.push(started(asking, let_through.flatten()));
                    }
                }
            }
            taken.pending.push(call.id);
        }
        taken
    }

    /// The request asking whether `call`, in doubt, may run again.
    fn asking(
        &self,
        call: &ToolCall,
        input: serde_json::Value,
        tier: SafetyTier,
    ) -> PendingApproval {
        PendingApproval {
            request_id: format!("ap_{}", ulid::Ulid::new().to_string().to_lowercase()),
            session_id: self.session.clone(),
            run_id: (self.run.cloned()).unwrap_or_else(|| RunId::new("r_unknown")),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            input,
            tier,
            asked_at_ms: now_ms(),
            paused: true,
            answer: None,
            kind: ApprovalKind::InDoubt,
            started_at_ms: None,
            started_on: None,
        }
    }
}

/// `asking` with when and where its call started, as the decision that let it through says.
fn started(asking: PendingApproval, let_through: Option<&AuditRecord>) -> PendingApproval {
    PendingApproval {
        started_at_ms: let_through.map(|a| a.at_ms),
        started_on: let_through.and_then(|a| a.node.clone()),
        ..asking
    }
}

/// Keeps `asking`, the requests about `session`'s calls in doubt, in `approvals` (listed at
/// once); the batch that stores them, if there are any.
pub(super) fn keep(
    approvals: &Approvals,
    session: &SessionId,
    asking: Vec<PendingApproval>,
) -> Option<WriteBatch> {
    if asking.is_empty() {
        return None;
    }
    approvals.restore(asking.clone());
    let kept = asking.into_iter().map(|request| Write::Approval {
        request_id: request.request_id.clone(),
        kept: Some(request),
    });
    Some(WriteBatch::of(session.clone(), kept))
}

/// The calls without results at the end of `stored`, after its last message that is not a
/// result: what a crash leaves ([`repair::check`] finds them; calls earlier in a history
/// always have theirs).
fn unanswered_at_end(stored: &[StoredMessage]) -> Vec<ToolCall> {
    let last_non_result =
        (stored.iter()).rposition(|m| !matches!(m.message.as_ref(), Message::ToolResult { .. }));
    let fault = repair::check(stored.iter().map(|m| m.message.as_ref()));
    (fault.unanswered.into_iter())
        .filter(|(at, _)| Some(*at) >= last_non_result)
        .map(|(_, call)| call)
        .collect()
}
