//! Checking a captured request for orphaned tool calls and results.

use serde_json::Value;
use std::collections::HashSet;

/// Every pairing fault in an OpenAI-format request: a `tool` message whose `tool_call_id` was
/// not called by the assistant message before it, a result given twice, or a call that gets no
/// result before the next non-tool message.
pub fn pairing_faults(request: &Value) -> Vec<String> {
    let mut faults = Vec::new();
    let Some(messages) = request.get("messages").and_then(Value::as_array) else {
        return vec!["the request has no messages array".into()];
    };
    let mut open: Vec<String> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    let close = |open: &mut Vec<String>,
                 answered: &mut HashSet<String>,
                 at: usize,
                 faults: &mut Vec<String>| {
        for id in open.drain(..) {
            if !answered.contains(&id) {
                faults.push(format!(
                    "tool call {id} has no result (before message {at})"
                ));
            }
        }
        answered.clear();
    };
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
        if role == "tool" {
            let id = m
                .get("tool_call_id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if !open.contains(&id) {
                faults.push(format!("message {i}: result for {id} has no matching call"));
            } else if !answered.insert(id.clone()) {
                faults.push(format!("message {i}: a second result for {id}"));
            }
            continue;
        }
        close(&mut open, &mut answered, i, &mut faults);
        if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
                open.push(id.to_owned());
            }
        }
    }
    close(&mut open, &mut answered, messages.len(), &mut faults);
    faults
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_both_kinds_of_orphan() {
        let good = json!({"messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}]},
            {"role": "tool", "tool_call_id": "b"},
            {"role": "tool", "tool_call_id": "a"},
        ]});
        assert!(pairing_faults(&good).is_empty());
        let bad = json!({"messages": [
            {"role": "tool", "tool_call_id": "z"},
            {"role": "assistant", "tool_calls": [{"id": "a"}]},
            {"role": "user", "content": "x"},
        ]});
        assert_eq!(pairing_faults(&bad).len(), 2);
    }
}
