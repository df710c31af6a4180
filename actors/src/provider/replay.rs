//! Replaying stored tool calls so that no provider can reject the history.
//!
//! The store keeps what the model sent, byte for byte (for the audit and `history`); the wire
//! gets what strict servers accept. Servers check replayed calls: llama.cpp parses every
//! call's arguments and answers HTTP 500 when they are not JSON; OpenAI refuses an empty or
//! ill-formed function name; Anthropic wants tool ids of `[A-Za-z0-9_-]` and no id used twice.
//! A call the model cut off or garbled would otherwise brick its session for good, on every
//! resume too. So, for every request, old sessions included:
//! - arguments that are not a JSON object are replayed as `{}` (the call's result already told
//!   the model what was wrong with them);
//! - an empty name, or one with other characters, is replayed cleaned (`[A-Za-z0-9_-]`, at
//!   most 64);
//! - ids are replayed cleaned the same way, at most 64 characters, and one used again gets a
//!   suffix; a result names the id its call was replayed with;
//! - a note the runtime put into the conversation (a Guardian hint, a summary, the Judge's
//!   word) is sent as a user message marked `[System]`: many local models' chat templates
//!   (Mistral's, Gemma's) allow one system message, the first, and refuse the request
//!   otherwise, on every resume too.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

/// The longest id or name a provider is sent.
const MAX_LEN: usize = 64;

/// A runtime note (a `system` message after the first) as the user message it is sent as.
pub(crate) fn system_note(content: &str) -> String {
    format!("[System] {content}")
}

/// A call's argument text as a JSON object: itself when it is one, else `{}`.
pub(crate) fn arguments(raw: &str) -> Cow<'_, str> {
    if is_object(raw) {
        Cow::Borrowed(raw)
    } else {
        Cow::Borrowed("{}")
    }
}

/// A call's arguments as the JSON object a provider's `input` needs (`{}` when they are not
/// one).
pub(crate) fn arguments_value(raw: &str) -> serde_json::Value {
    serde_json::from_str::<serde_json::Value>(raw)
        .ok()
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| serde_json::Value::Object(serde_json::Map::new()))
}

/// Whether `raw` is a JSON object. Checked on every replay of every stored call, so it only
/// validates (a value starting with `{` is an object) and builds nothing.
pub(crate) fn is_object(raw: &str) -> bool {
    raw.trim_start().starts_with('{') && serde_json::from_str::<serde::de::IgnoredAny>(raw).is_ok()
}

/// A tool name as providers accept it.
pub(crate) fn tool_name(name: &str) -> Cow<'_, str> {
    match clean(name) {
        Cow::Borrowed("") => Cow::Borrowed("unnamed_tool"),
        cleaned => cleaned,
    }
}

/// `[A-Za-z0-9_-]` only (others become `_`), at most [`MAX_LEN`]: a long one keeps its start
/// and a hash of the whole, so two long ids stay apart.
fn clean(text: &str) -> Cow<'_, str> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if text.len() <= MAX_LEN && text.chars().all(allowed) {
        return Cow::Borrowed(text);
    }
    let mapped: String = text
        .chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .collect();
    if mapped.len() <= MAX_LEN {
        return Cow::Owned(mapped);
    }
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    Cow::Owned(format!("{}_{hash:016x}", &mapped[..MAX_LEN - 17]))
}

/// The ids a conversation's calls and results are replayed with, worked out as its messages
/// are encoded, in order: a call takes its cleaned id, or a suffixed one when that was used
/// before; a result takes the id its call was given.
/// It owns what it remembers, so that a run's next request can go on from where the last one
/// ended (see [`super::prefix`]).
#[derive(Debug, Default)]
pub(crate) struct ReplayIds {
    used: HashSet<String>,
    /// Stored ids replayed under another one, to the latest id given.
    renamed: HashMap<String, String>,
}

impl ReplayIds {
    /// The id the call stored as `stored` is replayed with.
    pub(crate) fn call<'a>(&mut self, stored: &'a str) -> Cow<'a, str> {
        let base = match clean(stored) {
            Cow::Borrowed("") => Cow::Borrowed("call"),
            cleaned => cleaned,
        };
        let mut id = base.clone();
        let mut n = 2;
        while self.used.contains(id.as_ref()) {
            let suffix = format!("_{n}");
            let keep = base.len().min(MAX_LEN - suffix.len());
            id = Cow::Owned(format!("{}{suffix}", &base[..keep]));
            n += 1;
        }
        self.used.insert(id.clone().into_owned());
        if id != stored {
            self.renamed
                .insert(stored.to_owned(), id.clone().into_owned());
        } else {
            self.renamed.remove(stored);
        }
        id
    }

    /// The id the result answering call `stored` is replayed with.
    pub(crate) fn result<'a>(&self, stored: &'a str) -> Cow<'a, str> {
        match self.renamed.get(stored) {
            Some(id) => Cow::Owned(id.clone()),
            None => clean(stored),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_that_are_not_an_object_replay_as_an_empty_one() {
        assert_eq!(arguments(r#"{"a": 1}"#), r#"{"a": 1}"#);
        for bad in ["", "{ \"query\": \"memory_search", "[1]", "42", "null", "{"] {
            assert_eq!(arguments(bad), "{}", "{bad:?}");
            assert!(arguments_value(bad).as_object().unwrap().is_empty());
        }
    }

    #[test]
    fn names_and_ids_are_cleaned_and_bounded() {
        assert_eq!(tool_name("read"), "read");
        assert_eq!(tool_name(""), "unnamed_tool");
        assert_eq!(tool_name("functions.read:0"), "functions_read_0");
        let long = "x".repeat(200);
        let a = clean(&long);
        let longer = format!("{long}y");
        let b = clean(&longer);
        assert_eq!(a.len(), MAX_LEN);
        assert_ne!(a, b);
    }

    #[test]
    fn an_id_used_again_is_replayed_apart_and_its_result_follows_it() {
        let mut ids = ReplayIds::default();
        assert_eq!(ids.call("c1"), "c1");
        assert_eq!(ids.result("c1"), "c1");
        assert_eq!(ids.call("c1"), "c1_2");
        assert_eq!(ids.result("c1"), "c1_2");
        assert_eq!(ids.call("a.b"), "a_b");
        assert_eq!(ids.result("a.b"), "a_b");
        assert_eq!(ids.call(""), "call");
    }
}
