//! The checks strict servers make of a request's replayed history, as llama.cpp's server does:
//! it parses every earlier tool call's arguments (and answers HTTP 500 when they are not JSON),
//! and refuses calls without a name; and the checks of the strict chat templates many local
//! models have (Mistral's, Gemma's): one system message, the first (HTTP 400, the template's
//! own words after the part of it that raised them). A real client must never send such a
//! history.

use serde_json::Value;

/// What a strict chat template answers to a `system` message after the first: its words come
/// after where the template failed, as llama.cpp reports a template's exception.
pub const SECOND_SYSTEM_REFUSED: &str =
    "Only user and assistant roles are supported, with the exception of an initial optional      system message!";

/// Why a strict server refuses `request` (an OpenAI chat request), if it does: the status and
/// the server's words.
pub(crate) fn refusal(request: &Value) -> Option<(u16, String)> {
    let messages = request.get("messages")?.as_array()?;
    if messages.iter().skip(1).any(|m| m["role"] == "system") {
        return Some((400, template_exception()));
    }
    calls_refusal(messages).map(|why| (500, why))
}

/// Why a strict server refuses a Responses request's input, if a template would.
pub(crate) fn input_refusal(request: &Value) -> Option<(u16, String)> {
    let items = request.get("input")?.as_array()?;
    let instructions = request.get("instructions").is_some_and(|i| i != "");
    let systems = items.iter().filter(|i| i["role"] == "system").count();
    (systems > usize::from(!instructions)).then(|| (400, template_exception()))
}

/// llama.cpp's report of a template's exception: where it was raised, then its words.
fn template_exception() -> String {
    let template = "{%- if messages[0]['role'] == 'system' %}{%- set system_message =                     messages[0]['content'] %}{%- set loop_messages = messages[1:] %}{%- else                     %}{%- set loop_messages = messages %}{%- endif %}{%- for message in                     loop_messages %}{%- if message['role'] not in ['user', 'assistant'] %}";
    format!(
        "Error rendering the chat template: while executing the template at row 1, column          512:\n{template}\n{}^\nJinja Exception: {SECOND_SYSTEM_REFUSED}",
        " ".repeat(60)
    )
}

/// Why llama.cpp refuses the replayed calls of `messages`, if it does.
fn calls_refusal(messages: &[Value]) -> Option<String> {
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
