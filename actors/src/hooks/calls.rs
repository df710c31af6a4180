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
        let step = Step::Call {
            event: HookEvent::PreToolUse,
            call: called(call, input),
        };
        let mut fired = self.fire(&step).await;
        // Kept as the tool takes it: a recovery replays it from the audit as it is.
        let cwd = self.cwd().to_owned();
        let as_tool = |v: Option<Value>| v.map(|v| super::input::as_tool_input(v, &cwd));
        fired.updated_input = as_tool(fired.updated_input.take());
        for decision in &mut fired.decisions {
            decision.updated_input = as_tool(decision.updated_input.take());
        }
        fired
    }

    /// Whether a `PermissionRequest` hook answers for the person about `call`: `Allow` or
    /// `Deny`, with what the hooks said.
    pub(crate) async fn permission(&self, call: &ToolCall, input: &Value) -> Fired {
        let step = Step::Call {
            event: HookEvent::PermissionRequest,
            call: called(call, input),
        };
        self.fire(&step).await
    }

    /// Tells the hooks that `call` ran, to `result`; what they have the model read beside it,
    /// and what they said (whether one stopped the run, among it).
    pub(crate) async fn after_call(
        &self,
        call: &ToolCall,
        input: &Value,
        result: &Result<String, String>,
    ) -> (Option<String>, Fired) {
        let event = match result {
            Ok(_) => HookEvent::PostToolUse,
            Err(_) => HookEvent::PostToolUseFailure,
        };
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
        (note, fired)
    }
}

fn called<'a>(call: &'a ToolCall, input: &'a Value) -> Called<'a> {
    Called {
        call_id: call.id.as_str(),
        name: &call.name,
        input,
    }
}
