//! What becomes of a call before it runs: an unknown tool, a call cut off at the output limit
//! or arguments the tool does not take are refused; a call a crash cut off is taken up by its
//! effect class; the rest goes to the run's `PreToolUse` hooks, then the security gate. After
//! it ran, its hooks are told.

use super::Context;
use crate::event::{EventKind, RunEvents};
use crate::message::ToolCall;
use crate::security::{Gate, Refused};
use crate::tools::{Effect, Tool, ToolContext, ToolRegistry};

/// What a call cut off at the output limit gets instead of running.
pub(crate) const CUT_OFF: &str = "validation_error: this call was cut off at your output limit \
(max_output_tokens) before its arguments were complete, so it did not run. Make it again with \
shorter arguments: write a large file in parts (write the first part, then add the rest with \
edit), or take a smaller step.";

/// What becomes of a call before it runs.
pub(super) enum Admitted {
    Run(std::sync::Arc<dyn Tool>, serde_json::Value),
    /// Not run: the result says why.
    Refused(String),
    /// Not run: a call a crash cut off had taken effect; its result.
    Done(String),
}

/// Decides about `call`, with what its `PreToolUse` hooks gave the model to read; `None`
/// when it was left for the next run (its approval is parked).
pub(super) async fn admit(
    registry: &ToolRegistry,
    gate: &Gate,
    call: &ToolCall,
    batch: Context<'_>,
) -> Option<(Admitted, Option<String>)> {
    let Context {
        ctx,
        cut_off,
        events,
        cut_at_output_limit,
        ..
    } = batch;
    let refused = |why: String| Some((Admitted::Refused(why), None));
    let tool = match registry.get(&call.name) {
        None => {
            return refused(format!(
                "unknown_tool: there is no tool named '{}'; the tools are: {}",
                call.name,
                registry.names().join(", ")
            ))
        }
        Some(_) if cut_at_output_limit && !crate::provider::replay::is_object(&call.arguments) => {
            return refused(CUT_OFF.to_owned())
        }
        Some(tool) => tool,
    };
    let given = match registry.validate(&call.name, &call.arguments) {
        Err(e) => return refused(e.to_string()),
        Ok(input) => input,
    };
    let cut = cut_off.iter().find(|c| c.id == call.id);
    // A call a crash cut off after its hooks were asked is decided again from their record,
    // and taken up as the input they gave it (what ran, if it ran).
    let recorded = (cut.filter(|c| !c.hooks.is_empty()))
        .map(|c| crate::hooks::Fired::recorded(c.hooks.clone()));
    let asked = recorded.is_some();
    let mut hooked = recorded.unwrap_or_default();
    let mut input = match changed_input(registry, call, given, (&hooked, gate, batch)) {
        Ok(input) => input,
        Err(why) => return refused(why),
    };
    if cut.is_some() {
        if let Some(done) = take_up(tool.as_ref(), &input, call, ctx, events, gate).await {
            return Some((Admitted::Done(done), None));
        }
    }
    if !asked {
        hooked = ctx.hooks.before_call(call, &input).await;
        input = match changed_input(registry, call, input, (&hooked, gate, batch)) {
            Ok(input) => input,
            Err(why) => return refused(why),
        };
    }
    if let Some(why) = &hooked.stop {
        // `"continue": false`: the gate refuses the call, and the run pauses after this step.
        ctx.interrupt
            .interrupt(format!("a PreToolUse hook stopped the run: {why}"));
    }
    let context = hooked.context.clone();
    let admitted = match gate
        .admit(call, tool.as_ref(), &input, ctx, events, hooked)
        .await
    {
        Ok(()) => Admitted::Run(tool.clone(), input),
        Err(Refused::Denied(denied)) => Admitted::Refused(denied),
        Err(Refused::Parked) => return None,
    };
    Some((admitted, context))
}

/// The input `hooked` gave `call`, as the tool takes it; else `given`. Refused (why, with the
/// hooks' decisions on the audit) when the tool does not take it.
fn changed_input(
    registry: &ToolRegistry,
    call: &ToolCall,
    given: serde_json::Value,
    (hooked, gate, batch): (&crate::hooks::Fired, &Gate, Context<'_>),
) -> Result<serde_json::Value, String> {
    let Some(updated) = &hooked.updated_input else {
        return Ok(given);
    };
    registry
        .validate(&call.name, &updated.to_string())
        .map_err(|e| {
            let decisions = (hooked.decisions.clone(), false);
            gate.record_hooks(call, batch.ctx, batch.events, decisions);
            format!(
                "validation_error: a PreToolUse hook changed this call's input to one the tool \
                 does not take ({e}); the call was not run"
            )
        })
}

/// `result` of `call` (run with `input`), once its `PostToolUse` (or `PostToolUseFailure`)
/// hooks were told: what they said follows it, for the model, and joins the audit; a hook
/// that stops the run pauses it after this step.
pub(super) async fn told_hooks(
    call: &ToolCall,
    input: &serde_json::Value,
    result: Result<String, String>,
    (ctx, gate, events): (&ToolContext, &Gate, &RunEvents),
) -> Result<String, String> {
    let (note, fired) = ctx.hooks.after_call(call, input, &result).await;
    if let Some(why) = &fired.stop {
        ctx.interrupt
            .interrupt(format!("a tool's hook stopped the run: {why}"));
    }
    // After the call, a crash runs it again with its hooks: only what they said is kept.
    if fired.said_something() {
        gate.record_hooks(call, ctx, events, (fired.decisions, true));
    }
    with_note(result, note)
}

/// `result` with `note` after it, for the model.
pub(super) fn with_note(
    result: Result<String, String>,
    note: Option<String>,
) -> Result<String, String> {
    let Some(note) = note else {
        return result;
    };
    let with_note = |text: String| format!("{text}\n{note}");
    result.map(with_note).map_err(with_note)
}

/// Takes up `call`, which a crash cut off, by what it may do, and says so: a reconcilable
/// call that had taken effect gets its result (`Some`), and is not run again; any other runs
/// (read-only, idempotent with the same key, a reconcilable one not done, an unsafe one that
/// never started) or is asked about (in doubt: the gate asks).
async fn take_up(
    tool: &dyn Tool,
    input: &serde_json::Value,
    call: &ToolCall,
    ctx: &ToolContext,
    events: &RunEvents,
    gate: &Gate,
) -> Option<String> {
    let effect = crate::security::effect_of(tool, input, ctx.workspace.root());
    let (found, action) = match effect {
        Effect::ReadOnly | Effect::Idempotent => (None, "run_again"),
        Effect::Reconcilable => match tool.reconcile(input, ctx).await {
            Ok(Some(done)) => (Some(done), "found_done"),
            // Not found done, or not readable: doing it (again) is what it meant.
            Ok(None) | Err(_) => (None, "not_done"),
        },
        Effect::Unsafe if gate.in_doubt(&ctx.session_id, &call.id) => (None, "in_doubt"),
        Effect::Unsafe => (None, "not_started"),
    };
    if found.is_some() {
        gate.record_found_done(call, tool.tier(), ctx, events);
    }
    events.emit(EventKind::CallRecovered {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        effect,
        action: action.into(),
    });
    found
}
