//! The checks strict servers make of a request's replayed history, as llama.cpp's server does:
//! it parses every earlier tool call's arguments (and answers HTTP 500 when they are not JSON),
//! and refuses calls without a name. A real client must never send such a history.

use serde_json::Value;

/// Why a strict server refuses `request` (an OpenAI chat request), if it does.
pub(crate) fn refusal(request: &Value) -> Option<String> {
    let messages = request.get("messages")?.as_array()?;
    let calls = messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
        .flatten();
    for call in calls {
        let function = &call["function"];
        let name = function["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            return Some("Tool call without a function name".into());
        }
        let arguments = function["arguments"].as_str().unwrap_or_default();
        if serde_json::from_str::<Value>(arguments).is_err() {
            return Some(format!(
                "Failed to parse tool call arguments as JSON: {arguments}"
            ));
        }
    }
    None
}
