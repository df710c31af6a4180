//! Scripted answers in OpenAI's Responses format (`/responses`): the same content the chat
//! replies carry, rendered as the Responses API's typed SSE events, and the checks the real
//! server makes of a request's input before it answers.

use crate::answer::{thirds, Answer};
use serde_json::{json, Value};
use std::collections::HashSet;

/// The encrypted content the scripted server gives reasoning item `id`.
pub fn encrypted_reasoning(id: &str) -> String {
    format!("enc:{id}")
}

/// The `(event name, JSON data)` pairs of a complete Responses stream: `response.created`;
/// a reasoning item, when there is one; a message with one text delta per element of
/// `deltas`; one `function_call` item per call, their arguments in three interleaved pieces;
/// then `response.completed`, or `response.incomplete` when cut at the output limit.
pub(crate) fn events(answer: &Answer<'_>) -> Vec<(String, String)> {
    let mut out = vec![event(
        "response.created",
        json!({"type": "response.created",
               "response": {"id": "resp_scripted", "status": "in_progress", "output": []}}),
    )];
    let mut index = 0;
    if let Some(id) = answer.reasoning {
        out.extend(reasoning(index, id));
        index += 1;
    }
    if !answer.deltas.is_empty() {
        out.extend(message(index, answer.deltas));
        index += 1;
    }
    out.extend(calls(index, answer.calls, answer.cut_at_limit));
    out.push(end(answer.usage, answer.cut_at_limit));
    out
}

/// Reasoning item `id` at `index`, announced empty and done whole.
fn reasoning(index: usize, id: &str) -> [(String, String); 2] {
    let done = json!({"type": "reasoning", "id": id,
                      "summary": [{"type": "summary_text", "text": "thinking it over"}],
                      "encrypted_content": encrypted_reasoning(id)});
    [
        item_event(
            "response.output_item.added",
            index,
            json!({"type": "reasoning", "id": id, "summary": []}),
        ),
        item_event("response.output_item.done", index, done),
    ]
}

/// A message at `index`, its text streamed in `deltas`.
fn message(index: usize, deltas: &[String]) -> Vec<(String, String)> {
    let mut out = vec![item_event(
        "response.output_item.added",
        index,
        json!({"type": "message", "id": "msg_scripted", "role": "assistant", "content": []}),
    )];
    for text in deltas {
        out.push(event(
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "item_id": "msg_scripted",
                   "output_index": index, "content_index": 0, "delta": text}),
        ));
    }
    out.push(item_event(
        "response.output_item.done",
        index,
        json!({"type": "message", "id": "msg_scripted", "role": "assistant",
               "content": [{"type": "output_text", "text": deltas.concat(), "annotations": []}]}),
    ));
    out
}

/// The function calls from `first` on, their arguments interleaved; a cut answer's calls are
/// never done.
fn calls(first: usize, calls: &[(String, String, String)], cut: bool) -> Vec<(String, String)> {
    let item = |id: &str, name: &str, arguments: &str| {
        json!({"type": "function_call", "id": format!("fc_{id}"), "call_id": id, "name": name,
               "arguments": arguments})
    };
    let mut out: Vec<_> = calls
        .iter()
        .enumerate()
        .map(|(n, (id, name, _))| {
            item_event("response.output_item.added", first + n, item(id, name, ""))
        })
        .collect();
    let pieces: Vec<Vec<String>> = calls.iter().map(|(_, _, a)| thirds(a)).collect();
    for round in 0..3 {
        for (n, parts) in pieces
            .iter()
            .enumerate()
            .filter(|(_, p)| !p[round].is_empty())
        {
            out.push(event(
                "response.function_call_arguments.delta",
                json!({"type": "response.function_call_arguments.delta",
                       "output_index": first + n, "delta": parts[round]}),
            ));
        }
    }
    if !cut {
        for (n, (id, name, arguments)) in calls.iter().enumerate() {
            out.push(item_event(
                "response.output_item.done",
                first + n,
                item(id, name, arguments),
            ));
        }
    }
    out
}

/// The response's end, with its usage.
fn end(usage: Option<(u64, u64)>, cut: bool) -> (String, String) {
    let (input, output) = usage.unwrap_or((0, 0));
    let usage =
        json!({"input_tokens": input, "output_tokens": output, "total_tokens": input + output});
    if cut {
        event(
            "response.incomplete",
            json!({"type": "response.incomplete",
                   "response": {"id": "resp_scripted", "status": "incomplete",
                                "incomplete_details": {"reason": "max_output_tokens"},
                                "usage": usage}}),
        )
    } else {
        event(
            "response.completed",
            json!({"type": "response.completed",
                   "response": {"id": "resp_scripted", "status": "completed", "usage": usage}}),
        )
    }
}

/// `events` as llama.cpp's `/v1/responses` sends them: no `output_index` (a delta names its
/// item by `item_id`), and a cut answer ended `response.completed`, its output tokens the
/// `limit` asked for.
pub(crate) fn as_llama_cpp(
    events: Vec<(String, String)>,
    limit: Option<u64>,
) -> Vec<(String, String)> {
    let mut ids: std::collections::HashMap<u64, String> = std::collections::HashMap::new();
    events
        .into_iter()
        .map(|(name, data)| {
            let mut value: Value = serde_json::from_str(&data).expect("a scripted event");
            let index = value.get("output_index").and_then(Value::as_u64);
            if let Some(object) = value.as_object_mut() {
                object.remove("output_index");
            }
            if let (Some(index), Some(id)) = (index, value["item"]["id"].as_str()) {
                ids.insert(index, id.to_owned());
            }
            if name.ends_with(".delta") {
                if let Some(id) = index.and_then(|i| ids.get(&i)) {
                    value["item_id"] = json!(id);
                }
            }
            if name == "response.incomplete" {
                let usage = &mut value["response"]["usage"];
                usage["output_tokens"] = json!(limit.unwrap_or(8192));
                value["type"] = json!("response.completed");
                value["response"]["status"] = json!("completed");
                if let Some(response) = value["response"].as_object_mut() {
                    response.remove("incomplete_details");
                }
                return ("response.completed".to_owned(), value.to_string());
            }
            (name, value.to_string())
        })
        .collect()
}

/// Why the real server refuses `request`'s input, if it does (HTTP 400): a function call
/// without its output, an output without its call, a reasoning item not passed back whole
/// (nothing is stored, so its encrypted content must come with it) or not followed by the
/// output it led to.
pub(crate) fn refusal(request: &Value) -> Option<String> {
    let items = request.get("input")?.as_array()?;
    let stored = request
        .get("store")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let outputs: HashSet<&str> = items
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .filter_map(|i| i["call_id"].as_str())
        .collect();
    let mut called = HashSet::new();
    for (n, item) in items.iter().enumerate() {
        match item["type"].as_str().unwrap_or("message") {
            "function_call" => {
                let id = item["call_id"].as_str().unwrap_or_default();
                if !outputs.contains(id) {
                    return Some(format!("No tool output found for function call {id}."));
                }
                if serde_json::from_str::<Value>(item["arguments"].as_str().unwrap_or("")).is_err()
                {
                    return Some(format!("Invalid 'input[{n}].arguments': not JSON."));
                }
                called.insert(id);
            }
            "function_call_output" => {
                let id = item["call_id"].as_str().unwrap_or_default();
                if !called.contains(id) {
                    return Some(format!(
                        "No tool call found for function call output with call_id {id}."
                    ));
                }
            }
            "reasoning" => {
                let id = item["id"].as_str().unwrap_or_default();
                if !stored && item.get("encrypted_content").is_none_or(Value::is_null) {
                    return Some(format!(
                        "Item with id '{id}' not found. Items are not persisted when `store` is set to false."
                    ));
                }
                let next = items.get(n + 1);
                let followed = next.is_some_and(|i| {
                    i["type"] == "function_call"
                        || i["type"] == "reasoning"
                        || (i["role"] == "assistant")
                });
                if !followed {
                    return Some(format!(
                        "Item '{id}' of type 'reasoning' was provided without its required following item."
                    ));
                }
            }
            _ => {}
        }
    }
    None
}

fn event(name: &str, data: Value) -> (String, String) {
    (name.to_owned(), data.to_string())
}

fn item_event(name: &str, index: usize, item: Value) -> (String, String) {
    event(
        name,
        json!({"type": name, "output_index": index, "item": item}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_real_servers_refusals_are_made() {
        let good = json!({"store": false, "input": [
            {"role": "user", "content": "x"},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"},
            {"type": "function_call", "call_id": "a", "name": "read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "a", "output": "ok"},
        ]});
        assert_eq!(refusal(&good), None);
        for (input, says) in [
            (
                json!([{"type": "function_call", "call_id": "a", "name": "r", "arguments": "{}"}]),
                "No tool output",
            ),
            (
                json!([{"type": "function_call_output", "call_id": "b", "output": "x"}]),
                "No tool call found",
            ),
            (
                json!([{"type": "reasoning", "id": "rs_2", "summary": []},
                    {"role": "assistant", "content": "hi"}]),
                "not persisted",
            ),
            (
                json!([{"type": "reasoning", "id": "rs_3", "summary": [], "encrypted_content": "e"},
                    {"role": "user", "content": "hi"}]),
                "required following item",
            ),
        ] {
            let why = refusal(&json!({"store": false, "input": input})).expect(says);
            assert!(why.contains(says), "{why}");
        }
    }

    #[test]
    fn a_cut_answer_ends_incomplete_without_its_calls_done() {
        let calls = [(
            "c1".to_string(),
            "write".to_string(),
            "{\"path\":\"a\"}".to_string(),
        )];
        let answer = Answer {
            deltas: &[],
            calls: &calls,
            usage: Some((3, 4)),
            cut_at_limit: true,
            reasoning: Some("rs_1"),
            llama_cpp: None,
        };
        let names: Vec<String> = events(&answer).into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names.last().map(String::as_str),
            Some("response.incomplete")
        );
        assert_eq!(
            names
                .iter()
                .filter(|n| *n == "response.output_item.done")
                .count(),
            1
        );
    }
}
