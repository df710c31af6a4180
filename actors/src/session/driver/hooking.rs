//! The run's hooks at the steps that are not calls (the executor and the gate ask them about
//! calls): a prompt taken or refused, a run sent back to work once at its end, a compaction, a
//! park and a run's end told. Every decision joins the audit with the turn it came in.

use super::{Driver, Step};
use crate::event::RunStatus;
use crate::hooks::{Fired, Step as HookStep};
use crate::message::Message;
use crate::store::{now_ms, AuditRecord, Write, WriteBatch};
use ryvos_protocol::hook::{HookEvent, HookVerdict};

impl Driver {
    /// Puts what hooks decided about a step that is no call on the audit, with the next commit.
    pub(super) fn audit_hooks(&mut self, event: HookEvent, fired: &Fired) {
        if fired.decisions.is_empty() {
            return;
        }
        let refused = matches!(
            fired.decided(),
            Some(HookVerdict::Block | HookVerdict::Deny)
        ) || fired.stop.is_some();
        let record = AuditRecord {
            at_ms: now_ms(),
            session_id: self.session.id.clone(),
            run_id: self.run.id().clone(),
            call_id: crate::ids::CallId::new(""),
            tool: event.as_str().to_owned(),
            input: String::new(),
            tier: crate::tools::SafetyTier::T0,
            reasons: Vec::new(),
            allowed: !refused,
            decided_by: "hook".into(),
            reason: fired.reason.clone().or_else(|| fired.stop.clone()),
            request_id: None,
            node: None,
            hooks: fired.decisions.clone(),
        };
        let batch = WriteBatch::of(self.session.id.clone(), [Write::Audit(record)]);
        self.session.submit_batch(batch);
    }

    /// A hook said `"continue": false`: the run ends `blocked`, saying why.
    pub(super) fn stopped_by_hook(&self, event: HookEvent, fired: &Fired) -> Step<()> {
        match &fired.stop {
            Some(why) => Err(self.end(
                RunStatus::Blocked,
                format!("a {event} hook stopped the run: {why}"),
            )),
            None => Ok(()),
        }
    }

    /// The run is about to end with `answer`: its `Stop` hooks (a Director's step: its
    /// `SubagentStop` hooks) may send it back to work once, with their reason for the model.
    /// Whether it was sent back.
    pub(super) async fn sent_back_by_hooks(&mut self, answer: &str) -> Step<bool> {
        let event = crate::hooks::stop_event(self.run.is_directed());
        let hooks = self.run.hooks().clone();
        let active = self.run.sent_back();
        let step = HookStep::Stop {
            event,
            active,
            answer,
        };
        let fired = self.wait(async { hooks.fire(&step).await }).await?;
        self.audit_hooks(event, &fired);
        self.stopped_by_hook(event, &fired)?;
        if fired.decided() != Some(HookVerdict::Block) {
            return Ok(false);
        }
        if self.run.send_back() {
            let message = format!(
                "a {event} hook asked to send the run back to work again ({}); a run is sent \
                 back once, so it ends",
                fired.reason_or(event)
            );
            self.run
                .events()
                .emit(crate::event::EventKind::Warning { message });
            return Ok(false);
        }
        let reason = fired.reason_or(event);
        self.session.history.push(Message::System {
            content: format!("[{event} hook] Do not stop yet: {reason}"),
        });
        Ok(true)
    }

    /// Tells the hooks of `step`, which decide nothing (a compaction, a park, a run's end);
    /// what they said is published and audited.
    pub(super) async fn tell_hooks(&mut self, step: HookStep<'_>) {
        let event = step.event();
        let hooks = self.run.hooks().clone();
        // Bounded by the hooks' own timeouts; a run that is ending has nothing else to wait for.
        let fired = hooks.fire(&step).await;
        self.audit_hooks(event, &fired);
    }

    /// The context the prompt's hooks gave, after the prompt.
    pub(super) fn push_hook_context(&mut self, event: HookEvent, context: Option<String>) {
        if let Some(context) = context {
            self.session.history.push(Message::System {
                content: format!("[{event} hook context]\n{context}"),
            });
        }
    }
}
