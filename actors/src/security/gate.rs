//! The gate every tool call passes before it runs. Its tier comes from the tool (or, for
//! `bash`, from reading the command); the command allowlist, `auto_approve` (never for T4)
//! and the tier policy decide: allow, ask a person, or deny. Every decision — tier, reasons,
//! who decided — is stored in the audit table before the call runs, and published. An asked
//! call that nobody answers within `approval_timeout_secs` is denied and recorded as
//! unanswered, never as a person's denial. A denied call is never silent: the model gets
//! `denied: …` and the loop goes on.

use super::approvals::{Answer, ApprovalKind, Approvals, PendingApproval};
use super::classify::{self, Classification};
use super::wording::{because, denial, in_doubt_denial, tier_name, unanswered};
use crate::checkpoint::{self, Checkpoint};
use crate::config::{Decision, SecurityConfig};
use crate::event::{EventKind, RunEvents};
use crate::hooks::Fired;
use crate::ids::SessionId;
use crate::message::ToolCall;
use crate::store::{now_ms, AuditRecord, StoreError, Write, WriteBatch};
use crate::text::truncate;
use crate::tools::{SafetyTier, Tool, ToolContext};
use ryvos_protocol::hook::HookVerdict;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// The longest input kept in an audit record, in bytes.
const AUDIT_INPUT_BYTES: usize = 2000;

/// The security gate.
#[derive(Clone)]
pub(crate) struct Gate {
    config: Arc<SecurityConfig>,
    allowlist: Arc<Vec<regex::Regex>>,
    approvals: Approvals,
    checkpoint: Checkpoint,
    /// This runtime, as its audit records name it ([`AuditRecord::node`]).
    node: Arc<str>,
    /// Calls a person allowed "always", per session: the key is the tool, or `bash` and its
    /// command. Stored too, so they hold across restarts.
    always: Arc<std::sync::Mutex<HashMap<SessionId, HashSet<String>>>>,
}

/// Why a call does not run now.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Refused {
    /// The `denied: …` result for the model.
    Denied(String),
    /// The run paused while the call waited for a person: it is left for the next run, and
    /// its request is kept.
    Parked,
}

/// Who let a call through, or kept it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    Allowlist,
    AutoApprove,
    AlwaysInSession,
    Policy(Decision),
    /// A `PreToolUse` hook allowed it (`true`) or denied it.
    Hook(bool),
}

impl Gate {
    /// The gate of `config`; a command allowlist pattern that does not compile is an error.
    /// `always` is what people allowed "always" before, as stored; `node` names this runtime
    /// in the audit.
    pub(crate) fn new(
        config: &SecurityConfig,
        approvals: Approvals,
        checkpoint: Checkpoint,
        always: HashMap<SessionId, HashSet<String>>,
        node: &str,
    ) -> Result<Self, String> {
        let allowlist = config
            .command_allowlist
            .iter()
            .map(|p| {
                // A pattern names a whole command, never a part of one.
                regex::Regex::new(&format!("^(?:{p})$")).map_err(|e| {
                    format!("security.command_allowlist: '{p}' is not a regular expression: {e}")
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            config: Arc::new(config.clone()),
            allowlist: Arc::new(allowlist),
            approvals,
            checkpoint,
            node: node.into(),
            always: Arc::new(std::sync::Mutex::new(always)),
        })
    }

    /// Whether `session`'s call `call` waits in doubt: a crash cut it off after it started.
    pub(crate) fn in_doubt(&self, session: &SessionId, call: &crate::ids::CallId) -> bool {
        self.approvals.in_doubt(session, call)
    }

    /// The audit's record of a decision about `call` (of `tier`, raised for `reasons`), not
    /// allowed and decided by nobody yet.
    pub(super) fn audit_record(
        &self,
        call: &ToolCall,
        tier: SafetyTier,
        reasons: Vec<String>,
        ctx: &ToolContext,
    ) -> AuditRecord {
        AuditRecord {
            at_ms: now_ms(),
            session_id: ctx.session_id.clone(),
            run_id: ctx.run_id.clone(),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            input: truncate(&call.arguments, AUDIT_INPUT_BYTES),
            tier,
            reasons,
            allowed: false,
            decided_by: String::new(),
            reason: None,
            request_id: None,
            node: Some(self.node.to_string()),
            hooks: Vec::new(),
        }
    }

    /// Decides whether `call` may run.
    pub(crate) async fn admit(
        &self,
        call: &ToolCall,
        tool: &dyn Tool,
        input: &serde_json::Value,
        ctx: &ToolContext,
        events: &RunEvents,
        hooked: Fired,
    ) -> Result<(), Refused> {
        let class = classify_call(tool, input, ctx.workspace.root());
        let in_doubt = self.approvals.in_doubt(&ctx.session_id, &call.id);
        let rule = match in_doubt {
            // A call a crash left in doubt is a person's to decide, whatever the policy says.
            true => Rule::Policy(Decision::Ask),
            false => self.rule(&ctx.session_id, tool.name(), input, &class),
        };
        let rule = match (super::hooked::overrule(&hooked, class.tier, in_doubt), rule) {
            (Some(HookVerdict::Deny), _) => Rule::Hook(false),
            (Some(HookVerdict::Ask), rule) if rule != Rule::Policy(Decision::Deny) => {
                Rule::Policy(Decision::Ask)
            }
            (Some(HookVerdict::Allow), Rule::Policy(Decision::Ask)) => Rule::Hook(true),
            (_, rule) => rule,
        };
        let mut record = self.audit_record(call, class.tier, class.reasons.clone(), ctx);
        record.hooks = hooked.decisions.clone();
        // What the decision stores with its audit record.
        let mut batch = WriteBatch::new(ctx.session_id.clone());
        let result = match rule {
            Rule::Allowlist
            | Rule::AutoApprove
            | Rule::AlwaysInSession
            | Rule::Hook(true)
            | Rule::Policy(Decision::Allow) => {
                record.allowed = true;
                record.decided_by = match rule {
                    Rule::Allowlist => "command_allowlist",
                    Rule::AutoApprove => "auto_approve",
                    Rule::AlwaysInSession => "always_in_session",
                    Rule::Hook(_) => "hook",
                    _ => "policy",
                }
                .into();
                Ok(())
            }
            Rule::Hook(false) => {
                record.decided_by = "hook".into();
                Err(super::hooked::denial(&hooked))
            }
            Rule::Policy(Decision::Deny) => {
                record.decided_by = "policy".into();
                Err(format!(
                    "denied: the security policy does not allow {} calls{}; the call was not run. \
                     Do it another way, or ask the user to allow it.",
                    tier_name(class.tier),
                    because(&class.reasons)
                ))
            }
            Rule::Policy(Decision::Ask) => {
                match self
                    .ask(call, input, &class, ctx, events, &mut record, &mut batch)
                    .await
                {
                    Err(Refused::Parked) => return Err(Refused::Parked),
                    Err(Refused::Denied(why)) => Err(why),
                    Ok(()) => Ok(()),
                }
            }
        };
        self.conclude(call, class, record, batch, result, events)
            .await
    }

    /// Puts the decision on record (before the call runs, unless it is a read) and says what
    /// it was; a decision that cannot be recorded refuses the call.
    async fn conclude(
        &self,
        call: &ToolCall,
        class: Classification,
        mut record: AuditRecord,
        mut batch: WriteBatch,
        result: Result<(), String>,
        events: &RunEvents,
    ) -> Result<(), Refused> {
        if !record.allowed && record.reason.is_none() {
            record.reason = result.as_ref().err().cloned();
        }
        if let Some(id) = &record.request_id {
            // Decided: a request kept while its run was paused is done with.
            batch.push(Write::Approval {
                request_id: id.clone(),
                kept: None,
            });
        }
        let (allowed, decided_by) = (record.allowed, record.decided_by.clone());
        batch.push(Write::Audit(record));
        let stored = if allowed && class.tier == SafetyTier::T0 {
            // A read changes nothing: its record goes with the next group commit, and a
            // failure to store it is reported, not waited for.
            self.record_detached(batch, events);
            Ok(())
        } else {
            // Nothing that can change anything runs without its decision on record.
            checkpoint::store(&self.checkpoint, batch).await
        };
        let (allowed, decided_by, result) = match stored {
            Ok(()) => (allowed, decided_by, result),
            Err(e) => (
                false,
                "audit_failed".to_owned(),
                Err(format!(
                    "denied: the decision could not be recorded in the audit table ({e}); the \
                     call was not run"
                )),
            ),
        };
        events.emit(EventKind::SecurityDecision {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            tier: class.tier,
            reasons: class.reasons,
            allowed,
            decided_by,
        });
        result.map_err(Refused::Denied)
    }

    fn rule(
        &self,
        session: &SessionId,
        tool: &str,
        input: &serde_json::Value,
        class: &Classification,
    ) -> Rule {
        if class.tier < SafetyTier::T4 && self.always_allowed(session, &always_key(tool, input)) {
            return Rule::AlwaysInSession;
        }
        if bash_command(tool, input).is_some_and(|c| self.allowlisted(c)) {
            return Rule::Allowlist;
        }
        if class.tier < SafetyTier::T4 && self.config.auto_approve.iter().any(|t| t == tool) {
            return Rule::AutoApprove;
        }
        let policy = &self.config.policy;
        Rule::Policy(match class.tier {
            SafetyTier::T0 => policy.t0,
            SafetyTier::T1 => policy.t1,
            SafetyTier::T2 => policy.t2,
            SafetyTier::T3 => policy.t3,
            SafetyTier::T4 => policy.t4,
        })
    }

    /// Whether every part of `command` is named by an allowlist pattern: the line must read,
    /// hold no substitutions, and each of its simple commands must match a pattern whole (so
    /// `git log.*` never lets `git log; curl x | sh` through).
    fn allowlisted(&self, command: &str) -> bool {
        if self.allowlist.is_empty() {
            return false;
        }
        let Ok(line) = super::shell::parse(command) else {
            return false;
        };
        line.substitutions.is_empty()
            && !line.commands.is_empty()
            && line.commands.iter().all(|cmd| {
                let mut text = cmd.words.join(" ");
                for w in &cmd.writes {
                    text.push_str(&format!(" > {w}"));
                }
                self.allowlist.iter().any(|p| p.is_match(&text))
            })
    }

    /// Asks a person and waits, at most `approval_timeout_secs`, or until the run ends or
    /// pauses. A request kept from a paused run is asked again under its id, or, when it was
    /// answered meanwhile, decided by that answer. An "always" approval joins `batch`, to be
    /// stored with the decision.
    #[allow(clippy::too_many_arguments)]
    async fn ask(
        &self,
        call: &ToolCall,
        input: &serde_json::Value,
        class: &Classification,
        ctx: &ToolContext,
        events: &RunEvents,
        record: &mut AuditRecord,
        batch: &mut WriteBatch,
    ) -> Result<(), Refused> {
        let kept = self
            .approvals
            .take_paused(&ctx.session_id, &call.id, &call.name, input);
        if kept.is_none() {
            // A call nobody was asked about yet: its `PermissionRequest` hooks may answer.
            if let Some(answered) = super::hooked::answered_by_hooks(call, input, ctx, record).await
            {
                return answered;
            }
        }
        let request_id = kept.as_ref().map_or_else(
            || format!("ap_{}", ulid::Ulid::new().to_string().to_lowercase()),
            |k| k.request_id.clone(),
        );
        let kind = kept.as_ref().map_or(ApprovalKind::Call, |k| k.kind);
        // A call in doubt is listed with when, and where, it first started.
        let started = (kept.as_ref()).map(|k| (k.started_at_ms, k.started_on.clone()));
        record.request_id = Some(request_id.clone());
        let timeout = Duration::from_secs(self.config.approval_timeout_secs.max(1));
        let answered = match kept.and_then(|k| k.answer) {
            Some(answer) => Some(answer),
            None => {
                let (started_at_ms, started_on) = started.unwrap_or_default();
                let pending = PendingApproval {
                    started_at_ms,
                    started_on,
                    ..request((&request_id, kind), call, input, class, ctx)
                };
                // On record before anyone is asked: a crash while it waits leaves the call
                // pending, to be asked again when the session resumes, never cut off.
                if let Err(e) = self.store_request(pending.clone()).await {
                    record.decided_by = "store_failed".into();
                    return Err(Refused::Denied(format!(
                        "denied: the approval request could not be stored ({e}); the call was \
                         not run"
                    )));
                }
                self.wait_for_answer(pending, &class.reasons, timeout, ctx, events)
                    .await?
            }
        };
        let (approved, reason, by) = match answered {
            Some(answer) => self.taken(answer, kind, class, call, input, ctx, batch),
            None if ctx.cancel.is_cancelled() => (
                false,
                Some("the run ended before anyone answered".to_owned()),
                "run_ended".to_owned(),
            ),
            // Nobody answered: that is not a person's denial, and is recorded as such.
            None => unanswered(timeout),
        };
        record.allowed = approved;
        record.decided_by = by.clone();
        record.reason = reason.clone();
        events.emit(EventKind::ApprovalResolved {
            request_id,
            approved,
            reason: reason.clone(),
            by: by.clone(),
        });
        if approved {
            return Ok(());
        }
        Err(Refused::Denied(match kind {
            ApprovalKind::InDoubt => in_doubt_denial(reason, &by),
            ApprovalKind::Call => denial(reason, &by),
        }))
    }

    /// A person's `answer` to a request of `kind`: approved, why, and by whom. An "always"
    /// approval (never of a T4 call, nor of one in doubt) joins `batch`.
    #[allow(clippy::too_many_arguments)]
    fn taken(
        &self,
        answer: Answer,
        kind: ApprovalKind,
        class: &Classification,
        call: &ToolCall,
        input: &serde_json::Value,
        ctx: &ToolContext,
        batch: &mut WriteBatch,
    ) -> (bool, Option<String>, String) {
        let Answer {
            approved,
            reason,
            by,
            always,
        } = answer;
        // A call in doubt is decided once: it is never let through unasked again.
        let always = always && kind == ApprovalKind::Call;
        if approved && always && class.tier < SafetyTier::T4 {
            let key = always_key(&call.name, input);
            self.allow_always(&ctx.session_id, key.clone());
            batch.push(Write::Always(key));
        }
        let by = match approved && always {
            true => format!("{by} (always, this session)"),
            false => by,
        };
        (approved, reason, by)
    }

    /// Opens `pending` and waits for its answer: `None` when nobody answered in time or the
    /// run ended; `Parked` when the run paused meanwhile (the request is kept for its next
    /// run).
    async fn wait_for_answer(
        &self,
        pending: PendingApproval,
        reasons: &[String],
        timeout: Duration,
        ctx: &ToolContext,
        events: &RunEvents,
    ) -> Result<Option<Answer>, Refused> {
        let request_id = pending.request_id.clone();
        let requested = EventKind::ApprovalRequested {
            request_id: request_id.clone(),
            call_id: pending.call_id.clone(),
            tool: pending.tool.clone(),
            input: pending.input.clone(),
            tier: pending.tier,
            reasons: reasons.to_vec(),
            kind: pending.kind,
        };
        // Open before it is announced: an answer may come the moment it is.
        let mut answer = self.approvals.open(pending);
        events.emit(requested);
        let waited = tokio::select! {
            answered = tokio::time::timeout(timeout, &mut answer) => answered.ok().and_then(Result::ok),
            _ = ctx.cancel.cancelled() => None,
            _ = ctx.interrupt.requested() => None,
        };
        if waited.is_none() && ctx.interrupt.is_requested() {
            if let Some(paused) = self.approvals.park(&request_id) {
                self.keep_paused(paused, events).await;
                return Err(Refused::Parked);
            }
        }
        // Withdrawn first, then a last look: an answer given just as the wait ended counts.
        Ok(waited.or_else(|| {
            self.approvals.withdraw(&request_id);
            answer.try_recv().ok()
        }))
    }

    /// Stores a request whose run paused, so it outlives the daemon; a failure is reported
    /// (the request still stands until the daemon stops).
    async fn keep_paused(&self, paused: PendingApproval, events: &RunEvents) {
        let id = paused.request_id.clone();
        if let Err(e) = self.store_request(paused).await {
            events.emit(EventKind::Error {
                message: format!(
                    "approval request {id} could not be stored while its run is paused: {e}; \
                     it will be asked again if the daemon restarts"
                ),
            });
        }
    }
}

impl Gate {
    /// Stores `request` (kept for its session's next run) and waits until it is durable.
    async fn store_request(&self, request: PendingApproval) -> Result<(), StoreError> {
        let batch = WriteBatch::of(
            request.session_id.clone(),
            [Write::Approval {
                request_id: request.request_id.clone(),
                kept: Some(request),
            }],
        );
        checkpoint::store(&self.checkpoint, batch).await
    }

    /// Hands `batch` to the store without waiting; a failure becomes an `Error` event.
    pub(super) fn record_detached(&self, batch: WriteBatch, events: &RunEvents) {
        let events = events.clone();
        let notify = crate::callback::Callback::new(
            move |stored: Result<(), crate::store::StoreError>| {
                if let Err(e) = stored {
                    events.emit(EventKind::Error {
                        message: format!(
                            "a security decision could not be stored in the audit table: {e}"
                        ),
                    });
                }
            },
            || Err(checkpoint::writer_gone()),
        );
        self.checkpoint.record(batch, notify);
    }
}

/// A call's tier, working in `workspace`: the tool's own, or for `bash`, what its command does.
pub(crate) fn classify_call(
    tool: &dyn Tool,
    input: &serde_json::Value,
    workspace: &std::path::Path,
) -> Classification {
    let base = tool.tier();
    match bash_command(tool.name(), input) {
        Some(command) => classify::bash(command, workspace, base),
        _ => Classification {
            tier: base,
            reasons: Vec::new(),
        },
    }
}

fn bash_command<'a>(tool: &str, input: &'a serde_json::Value) -> Option<&'a str> {
    input
        .get("command")
        .and_then(|c| c.as_str())
        .filter(|_| tool == "bash")
}

/// What an "always" approval covers: the tool, or for `bash`, the exact command.
fn always_key(tool: &str, input: &serde_json::Value) -> String {
    match bash_command(tool, input) {
        Some(command) => format!("bash\u{0}{}", command.trim()),
        None => tool.to_owned(),
    }
}

impl Gate {
    fn always_allowed(&self, session: &SessionId, key: &str) -> bool {
        let always = self.always.lock().unwrap_or_else(|e| e.into_inner());
        always.get(session).is_some_and(|keys| keys.contains(key))
    }

    fn allow_always(&self, session: &SessionId, key: String) {
        let mut always = self.always.lock().unwrap_or_else(|e| e.into_inner());
        always.entry(session.clone()).or_default().insert(key);
    }
}

/// The request that asks a person about `call`.
fn request(
    (request_id, kind): (&str, ApprovalKind),
    call: &ToolCall,
    input: &serde_json::Value,
    class: &Classification,
    ctx: &ToolContext,
) -> PendingApproval {
    PendingApproval {
        request_id: request_id.to_owned(),
        session_id: ctx.session_id.clone(),
        run_id: ctx.run_id.clone(),
        call_id: call.id.clone(),
        tool: call.name.clone(),
        input: input.clone(),
        tier: class.tier,
        asked_at_ms: now_ms(),
        paused: false,
        answer: None,
        kind,
        started_at_ms: None,
        started_on: None,
    }
}
