//! Doom loops: the same call, with the same input and the same result, again and again.
//!
//! A call is fingerprinted by its tool's name and a hash of its input in canonical form (object
//! keys sorted, so `{"a":1,"b":2}` and `{"b":2,"a":1}` are one input), and its result by a hash
//! of what came back. Only calls that match in both extend a streak: a call whose input changed
//! (the edit–test–fix cycle), or a repeated call whose result changed because the workspace
//! did, starts a new one.

use ryvos_protocol::records::Streak;
use serde_json::Value;
use std::hash::{DefaultHasher, Hash, Hasher};

/// One finished tool call, as the Guardian sees it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CallReport {
    pub tool: String,
    /// The tool's name and canonical input, hashed.
    pub fingerprint: u64,
    /// The result, hashed.
    pub outcome: u64,
    pub failed: bool,
}

impl CallReport {
    /// The report of a call of `tool` with `arguments` (the model's raw text) that produced
    /// `output`.
    pub(crate) fn new(tool: &str, arguments: &str, output: &str, failed: bool) -> Self {
        let mut input = DefaultHasher::new();
        tool.hash(&mut input);
        match serde_json::from_str::<Value>(arguments) {
            Ok(value) => hash_canonical(&value, &mut input),
            // Unparseable input is compared as the text it is.
            Err(_) => arguments.hash(&mut input),
        }
        let mut result = DefaultHasher::new();
        failed.hash(&mut result);
        output.hash(&mut result);
        Self {
            tool: tool.to_owned(),
            fingerprint: input.finish(),
            outcome: result.finish(),
            failed,
        }
    }
}

/// Hashes a JSON value with object keys in sorted order.
fn hash_canonical(value: &Value, h: &mut DefaultHasher) {
    match value {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => (1u8, b).hash(h),
        Value::Number(n) => (2u8, n.to_string()).hash(h),
        Value::String(s) => (3u8, s).hash(h),
        Value::Array(items) => {
            (4u8, items.len()).hash(h);
            items.iter().for_each(|v| hash_canonical(v, h));
        }
        Value::Object(map) => {
            (5u8, map.len()).hash(h);
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for k in keys {
                k.hash(h);
                hash_canonical(&map[k], h);
            }
        }
    }
}

/// Extends `streak` with `call`, or starts a new one; true if it was extended.
pub(crate) fn extend(streak: &mut Option<Streak>, call: &CallReport) -> bool {
    if let Some(s) = streak.as_mut() {
        if s.fingerprint == call.fingerprint && s.outcome == call.outcome {
            s.count += 1;
            return true;
        }
    }
    *streak = Some(Streak {
        tool: call.tool.clone(),
        fingerprint: call.fingerprint,
        outcome: call.outcome,
        failed: call.failed,
        count: 1,
    });
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_does_not_change_an_input_and_a_changed_result_breaks_the_streak() {
        let a = CallReport::new(
            "bash",
            r#"{"command":"make","timeout_secs":5}"#,
            "err",
            true,
        );
        let b = CallReport::new(
            "bash",
            r#"{"timeout_secs":5, "command":"make"}"#,
            "err",
            true,
        );
        assert_eq!(a, b);
        let mut streak = None;
        assert!(!extend(&mut streak, &a));
        assert!(extend(&mut streak, &b));
        assert_eq!(streak.as_ref().unwrap().count, 2);
        // The same command now succeeds: the workspace changed; no loop.
        let fixed = CallReport::new(
            "bash",
            r#"{"command":"make","timeout_secs":5}"#,
            "ok",
            false,
        );
        assert!(!extend(&mut streak, &fixed));
        assert_eq!(streak.as_ref().unwrap().count, 1);
        // A changed input is another call.
        let other = CallReport::new("bash", r#"{"command":"make test"}"#, "ok", false);
        assert_ne!(other.fingerprint, fixed.fingerprint);
    }
}
