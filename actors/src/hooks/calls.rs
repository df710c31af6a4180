//! A tool call's hooks: `PreToolUse` before the gate (it may deny, ask, allow, or change the
//! input, which then passes the gate as any input does), `PostToolUse` or `PostToolUseFailure`
//! after it ran (what they say is put beside the result for the model).

use super::{Called, Fired, RunHooks, Step};
use crate::message::ToolCall;
use ryvos_protocol::hook::{HookEvent, HookVerdict};
use serde_json::Value;

impl RunHooks {
    /// The `PreToolUse` hooks' decision about `call`, whose input is `input`.
    pub(crate) async fn before_call(&self, call: &ToolCall, input: &Value) -> Fired {
        if !self.any(HookEvent::PreToolUse) {
            return Fired::default();
        }
        let step = Step::Call {
            event: HookEvent::PreToolUse,
            call: called(call, input),
        };
        let mut fired = self.fire(&step).await;
        if let Some(updated) = fired.updated_input.take() {
            fired.updated_input = Some(super::input::as_tool_input(updated, self.cwd()));
        }
        fired
    }

    /// Whether a `PermissionRequest` hook answers for the person about `call`: `Allow` or
    /// `Deny`, with what the hooks said.
    pub(crate) async fn permission(&self, call: &ToolCall, input: &Value) -> Fired {
        if !self.any(HookEvent::PermissionRequest) {
            return Fired::default();
        }
        let step = Step::Call {
            event: HookEvent::PermissionRequest,
            call: called(call, input),
        };
        self.fire(&step).await
    }

    /// Tells the hooks that `call` ran, to `result`; what they have the model read beside it,
    /// and whether one stopped the run (its reason).
    pub(crate) async fn after_call(
        &self,
        call: &ToolCall,
        input: &Value,
        result: &Result<String, String>,
    ) -> (Option<String>, Option<String>) {
        let event = match result {
            Ok(_) => HookEvent::PostToolUse,
            Err(_) => HookEvent::PostToolUseFailure,
        };
        if !self.any(event) {
            return (None, None);
        }
        let call = called(call, input);
        let step = match result {
            Ok(output) => Step::PostToolUse { call, output },
            Err(error) => Step::PostToolUseFailure { call, error },
        };
        let fired = self.fire(&step).await;
        let mut notes = Vec::new();
        if fired.decided() == Some(HookVerdict::Block) {
            notes.push(format!("[{event} hook] {}", fired.reason_or(event)));
        }
        if let Some(context) = &fired.context {
            notes.push(format!("[{event} hook context] {context}"));
        }
        let note = (!notes.is_empty()).then(|| notes.join("\n"));
        (note, fired.stop)
    }
}

fn called<'a>(call: &'a ToolCall, input: &'a Value) -> Called<'a> {
    Called {
        call_id: call.id.as_str(),
        name: &call.name,
        input,
    }
}
