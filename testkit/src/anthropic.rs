//! Scripted answers in Anthropic's Messages format: the same content the OpenAI replies carry,
//! rendered as Anthropic's typed SSE events, and its error bodies.

use crate::answer::thirds;
use serde_json::{json, Value};

/// The `(event name, JSON data)` pairs of a complete Anthropic stream: `message_start`, a text
/// block with one delta per element of `deltas` (when there are any), one `tool_use` block per
/// call `(id, name, arguments)` with its arguments in three `input_json_delta` pieces,
/// `message_delta` with the stop reason and output tokens, and `message_stop`.
pub(crate) fn events(
    deltas: &[String],
    calls: &[(String, String, String)],
    usage: Option<(u64, u64)>,
    cut_at_limit: bool,
) -> Vec<(String, String)> {
    let (input_tokens, output_tokens) = usage.unwrap_or((0, 0));
    let mut out = vec![event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": "msg_scripted", "type": "message", "role": "assistant", "content": [],
            "model": "scripted", "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 0}}}),
    )];
    let mut index = 0;
    if !deltas.is_empty() {
        out.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index,
                   "content_block": {"type": "text", "text": ""}}),
        ));
        for text in deltas {
            out.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index,
                       "delta": {"type": "text_delta", "text": text}}),
            ));
        }
        out.push(block_stop(index));
        index += 1;
    }
    for (id, name, arguments) in calls {
        out.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index,
                   "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ));
        for piece in thirds(arguments).into_iter().filter(|p| !p.is_empty()) {
            out.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index,
                       "delta": {"type": "input_json_delta", "partial_json": piece}}),
            ));
        }
        out.push(block_stop(index));
        index += 1;
    }
    let stop_reason = if cut_at_limit {
        "max_tokens"
    } else if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    out.push(event(
        "message_delta",
        json!({"type": "message_delta",
               "delta": {"stop_reason": stop_reason, "stop_sequence": null},
               "usage": {"output_tokens": output_tokens}}),
    ));
    out.push(event("message_stop", json!({"type": "message_stop"})));
    out
}

/// An error body in Anthropic's shape, its `error.type` matching `status`.
pub(crate) fn error_body(status: u16, message: &str) -> String {
    let kind = match status {
        429 => "rate_limit_error",
        529 => "overloaded_error",
        401 => "authentication_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
}

fn event(name: &str, data: Value) -> (String, String) {
    (name.to_owned(), data.to_string())
}

fn block_stop(index: usize) -> (String, String) {
    event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_and_tool_answer_has_the_blocks_in_order() {
        let events = events(
            &["Hi".into()],
            &[(
                "toolu_1".into(),
                "read".into(),
                r#"{"path":"é.txt"}"#.into(),
            )],
            Some((12, 5)),
            false,
        );
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names.first(), Some(&"message_start"));
        assert_eq!(names.last(), Some(&"message_stop"));
        let arguments: String = events
            .iter()
            .filter_map(|(_, d)| serde_json::from_str::<Value>(d).ok())
            .filter_map(|v| v["delta"]["partial_json"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(arguments, r#"{"path":"é.txt"}"#);
        assert!(events[events.len() - 2].1.contains("\"tool_use\""));
        assert!(crate::answer::named_events(events)[0].starts_with("event: message_start\ndata: {"));
    }

    #[test]
    fn error_types_follow_the_status() {
        assert!(error_body(529, "busy").contains("overloaded_error"));
        assert!(error_body(503, "down").contains("api_error"));
        assert!(error_body(400, "bad").contains("invalid_request_error"));
    }
}
