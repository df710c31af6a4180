//! A model call's `chat` span, when its run is traced: opened with what the model was sent
//! (only when `[otel] capture_content` is on), ended with how the call ended; and a summary's
//! span around its call.
//!
//! Contents are written as the GenAI conventions' JSON: a list of messages, each a `role` and
//! its `parts` (`text`, `tool_call`, `tool_call_response`).

use super::{ModelAnswer, ModelChain, Purpose};
use crate::event::RunEvents;
use crate::message::Message;
use crate::provider::{AssistantResponse, ChatRequest};
use crate::telemetry::{ChatEnd, ChatInput, ChatSpan, StepSpan};
use serde_json::{json, Value};

/// Opens the span of a call of `chain` about `request`, under `within` or else the run's
/// span; `None` when the run is not traced.
pub(crate) fn open_chat(
    events: &RunEvents,
    within: Option<&StepSpan>,
    chain: &ModelChain,
    request: &ChatRequest,
) -> Option<ChatSpan> {
    let trace = events.trace()?;
    let content = trace.captures_content().then(|| ChatInput {
        system: json!([{"type": "text", "content": &*request.system}]).to_string(),
        messages: Value::Array(request.messages.iter().map(|m| message(m)).collect()).to_string(),
    });
    Some(trace.chat(within, chain.model(), chain.provider_name(), content))
}

/// Ends a call's span with its result (`None`: cancelled with its run).
pub(crate) fn end_chat(events: &RunEvents, chat: Option<ChatSpan>, result: Option<&ModelAnswer>) {
    let (Some(trace), Some(chat)) = (events.trace(), chat) else {
        return;
    };
    let ended = match result.map(|answer| &answer.result) {
        Some(Ok(reply)) => ChatEnd::Answered {
            model: &reply.model,
            response_id: reply.response.id.as_deref(),
            finish_reason: reply.response.finish.as_ref().map(|f| f.as_str()),
            input_tokens: reply.usage.input_tokens,
            output_tokens: reply.usage.output_tokens,
            output: trace
                .captures_content()
                .then(|| output(&reply.response).to_string()),
        },
        Some(Err(e)) => ChatEnd::Failed {
            error_type: e.kind(),
            message: "the model call failed",
        },
        None => ChatEnd::Failed {
            error_type: "cancelled",
            message: "the run ended first",
        },
    };
    trace.chat_ended(chat, ended);
}

/// Opens a summary's span, when `purpose` is one and the run is traced.
pub(super) fn open_summary(events: &RunEvents, purpose: Purpose) -> Option<StepSpan> {
    match purpose {
        Purpose::Summary { messages } => Some(events.trace()?.summarizing(messages)),
        Purpose::Turn => None,
    }
}

/// Ends a summary's span with its call's result (`None`: cancelled with its run).
pub(super) fn end_summary(
    events: &RunEvents,
    summary: Option<StepSpan>,
    result: Option<&ModelAnswer>,
) {
    let (Some(trace), Some(summary)) = (events.trace(), summary) else {
        return;
    };
    let failed = match result {
        Some(answer) => answer.result.as_ref().err().map(|e| e.to_string()),
        None => Some("the run ended first".to_owned()),
    };
    trace.summarized(summary, failed.as_deref());
}

/// One message of the conversation, as the conventions write it.
fn message(message: &Message) -> Value {
    match message {
        Message::User { content } => json!({"role": "user", "parts": [text(content)]}),
        Message::System { content } => json!({"role": "system", "parts": [text(content)]}),
        Message::Assistant {
            content,
            tool_calls,
            ..
        } => assistant(content, tool_calls, None),
        Message::ToolResult {
            call_id, content, ..
        } => json!({"role": "tool", "parts": [{
            "type": "tool_call_response", "id": call_id.as_str(), "response": content,
        }]}),
    }
}

/// The model's answer, as the conventions write it.
fn output(response: &AssistantResponse) -> Value {
    let finish = response.finish.as_ref().map(|f| f.as_str());
    json!([assistant(&response.text, &response.tool_calls, finish)])
}

fn assistant(content: &str, calls: &[crate::message::ToolCall], finish: Option<&str>) -> Value {
    let mut parts: Vec<Value> = Vec::new();
    if !content.is_empty() {
        parts.push(text(content));
    }
    for call in calls {
        // Arguments are JSON the model wrote; kept as text when they do not parse.
        let arguments = serde_json::from_str::<Value>(&call.arguments)
            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
        parts.push(json!({
            "type": "tool_call", "id": call.id.as_str(), "name": call.name,
            "arguments": arguments,
        }));
    }
    let mut message = json!({"role": "assistant", "parts": parts});
    if let Some(finish) = finish {
        message["finish_reason"] = Value::from(finish);
    }
    message
}

fn text(content: &str) -> Value {
    json!({"type": "text", "content": content})
}
