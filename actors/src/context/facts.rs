//! The exact facts in a part of a conversation, found deterministically, so that what a summary
//! of that part leaves out can be kept verbatim beside it: identifiers and codes
//! (`FP-77A1-QX`, `E0382`, commit hashes), numbers with their units, file paths, URLs, the
//! commands that were run with their exit status, and what the user named in quotes.
//!
//! Extraction reads the messages once, when a part leaves the context (never per turn).

use crate::message::Message;
use regex::Regex;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

/// The longest fact kept, in characters (a longer command or path is left out).
const MAX_FACT_CHARS: usize = 200;

/// What kind of fact it is, which says how it is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Identifier,
    Quantity,
    Path,
    Url,
    /// A command run with the bash tool: `text` is the command, `exit` its status.
    Command {
        exit: Option<i32>,
    },
    /// Quoted by the user.
    Name,
}

/// One exact fact: its text, how often it came up, and where it last did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fact {
    pub text: String,
    pub kind: Kind,
    pub mentions: u32,
    /// The index of the last message that mentioned it.
    pub last: usize,
}

impl Fact {
    /// The fact as the kept block shows it.
    pub(crate) fn shown(&self) -> String {
        match self.kind {
            Kind::Command { exit: Some(code) } => format!("ran `{}` (exit {code})", self.text),
            Kind::Command { exit: None } => format!("ran `{}`", self.text),
            _ => self.text.clone(),
        }
    }

    /// How much a fact of its kind is worth keeping: an id, a URL or a command run cannot be
    /// guessed again; an absolute path or a name the user gave rarely can; a bare file name
    /// or a number can often be found again.
    fn weight(&self) -> u8 {
        match self.kind {
            Kind::Identifier | Kind::Url | Kind::Command { .. } => 3,
            Kind::Name => 2,
            Kind::Path if self.text.starts_with(['/', '~']) => 2,
            Kind::Path | Kind::Quantity => 1,
        }
    }

    /// Whether `summary` holds this fact exactly.
    pub(crate) fn kept_by(&self, summary: &str) -> bool {
        summary.contains(&self.text)
    }
}

static URL: LazyLock<Regex> = LazyLock::new(|| regex(r#"https?://[^\s"'<>()\[\]{}`]+"#));
static PATH: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?:~|\.{1,2})?/[A-Za-z0-9._\-]+(?:/[A-Za-z0-9._\-]+)*|\b[A-Za-z0-9_\-]+(?:/[A-Za-z0-9._\-]+)*\.[A-Za-z][A-Za-z0-9]{0,7}\b",
    )
});
static IDENTIFIER: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"\b(?:[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+|[A-Z]{1,5}[0-9]{3,}[A-Z0-9]*|[0-9a-f]{7,40})\b")
});
static QUANTITY: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"\$[0-9][0-9,]*(?:\.[0-9]+)?|\b[0-9][0-9,]*(?:\.[0-9]+)?\s?(?:%|(?:ms|s|secs?|seconds?|minutes?|mins?|hours?|h|days?|B|KB|MB|GB|TB|KiB|MiB|GiB|tokens|cents|USD|EUR|px)\b)",
    )
});
static QUOTED: LazyLock<Regex> = LazyLock::new(|| regex(r#""([^"\n]{2,60})"|`([^`\n]{2,60})`"#));
static EXIT: LazyLock<Regex> = LazyLock::new(|| regex(r"^the command exited with (-?[0-9]+)"));

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("the facts' patterns are valid")
}

/// The facts in `messages`, those most worth keeping first.
pub(crate) fn extract(messages: &[Arc<Message>]) -> Vec<Fact> {
    let mut found = Found::default();
    for (at, message) in messages.iter().enumerate() {
        match &**message {
            Message::User { content } => {
                found.text(content, at);
                for quoted in QUOTED.captures_iter(content) {
                    if let Some(name) = quoted.get(1).or(quoted.get(2)) {
                        found.add(name.as_str(), Kind::Name, at);
                    }
                }
            }
            Message::System { content } => found.text(content, at),
            Message::Assistant {
                content,
                tool_calls,
                ..
            } => {
                found.text(content, at);
                for call in tool_calls {
                    found.text(&call.arguments, at);
                }
            }
            Message::ToolResult { content, .. } => found.text(content, at),
        }
    }
    found.commands(messages);
    found.ranked()
}

/// The facts found so far, by text.
#[derive(Default)]
struct Found {
    facts: HashMap<String, Fact>,
}

impl Found {
    fn add(&mut self, text: &str, kind: Kind, at: usize) {
        let text = text.trim_end_matches(['.', ',', ';', ':', '!', '?']);
        if text.is_empty() || text.chars().count() > MAX_FACT_CHARS {
            return;
        }
        let fact = self.facts.entry(text.to_owned()).or_insert(Fact {
            text: text.to_owned(),
            kind,
            mentions: 0,
            last: at,
        });
        fact.mentions += 1;
        fact.last = at;
    }

    /// The identifiers, quantities, paths and URLs in `text` (a path inside a URL is the URL's).
    fn text(&mut self, text: &str, at: usize) {
        let urls: Vec<_> = URL.find_iter(text).map(|m| m.range()).collect();
        for url in &urls {
            self.add(&text[url.clone()], Kind::Url, at);
        }
        let outside =
            |r: &std::ops::Range<usize>| !urls.iter().any(|u| u.start <= r.start && r.end <= u.end);
        let kinds = [
            (&*PATH, Kind::Path),
            (&*IDENTIFIER, Kind::Identifier),
            (&*QUANTITY, Kind::Quantity),
        ];
        for (pattern, kind) in kinds {
            for m in pattern.find_iter(text).filter(|m| outside(&m.range())) {
                if kind != Kind::Identifier || is_code(m.as_str()) {
                    self.add(m.as_str(), kind, at);
                }
            }
        }
    }

    /// The commands the bash tool ran, with the exit status their results report.
    fn commands(&mut self, messages: &[Arc<Message>]) {
        let mut asked: HashMap<&str, (String, usize)> = HashMap::new();
        for (at, message) in messages.iter().enumerate() {
            match &**message {
                Message::Assistant { tool_calls, .. } => {
                    for call in tool_calls.iter().filter(|c| c.name == "bash") {
                        let command = serde_json::from_str::<serde_json::Value>(&call.arguments)
                            .ok()
                            .and_then(|v| v["command"].as_str().map(str::to_owned));
                        if let Some(command) = command {
                            asked.insert(call.id.as_str(), (command, at));
                        }
                    }
                }
                Message::ToolResult {
                    call_id,
                    content,
                    is_error,
                    ..
                } => {
                    if let Some((command, _)) = asked.remove(call_id.as_str()) {
                        let exit = match EXIT.captures(content) {
                            Some(code) => code[1].parse().ok(),
                            None if !is_error => Some(0),
                            None => None,
                        };
                        self.add(command.trim(), Kind::Command { exit }, at);
                    }
                }
                _ => {}
            }
        }
    }

    /// Worth keeping first (see [`Fact::weight`]), then most mentioned, then most recent.
    fn ranked(self) -> Vec<Fact> {
        let mut facts: Vec<Fact> = self.facts.into_values().collect();
        facts.sort_by(|a, b| {
            (b.weight(), b.mentions, b.last)
                .cmp(&(a.weight(), a.mentions, a.last))
                .then_with(|| a.text.cmp(&b.text))
        });
        facts
    }
}

/// Whether an identifier-shaped word is a code rather than a word: it has a digit, and a hex
/// string has a letter too (a plain number is not an id).
fn is_code(word: &str) -> bool {
    let digit = word.bytes().any(|b| b.is_ascii_digit());
    let letter = word.bytes().any(|b| b.is_ascii_alphabetic());
    digit && letter
}

/// Of `facts`, those `summary` left out, split into the ones kept (at most `most`, the first
/// of the ranking) and the ones dropped past that budget.
pub(crate) fn left_out(facts: Vec<Fact>, summary: &str, most: usize) -> (Vec<Fact>, Vec<Fact>) {
    let mut missing: Vec<Fact> = facts.into_iter().filter(|f| !f.kept_by(summary)).collect();
    let dropped = missing.split_off(most.min(missing.len()));
    (missing, dropped)
}

/// The heading of the block of facts a summary left out.
pub(crate) const FACTS_HEADING: &str =
    "[Exact facts from the summarized part that the summary left out]";

/// The block that keeps `facts` verbatim, below a summary; empty when there are none.
pub(crate) fn block(facts: &[Fact]) -> String {
    if facts.is_empty() {
        return String::new();
    }
    let mut block = String::from(FACTS_HEADING);
    for fact in facts {
        block.push_str("\n- ");
        block.push_str(&fact.shown());
    }
    block
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::CallId;
    use crate::message::ToolCall;

    fn texts(facts: &[Fact]) -> Vec<&str> {
        facts.iter().map(|f| f.text.as_str()).collect()
    }

    #[test]
    fn codes_paths_urls_quantities_and_names_are_found_and_ranked() {
        let messages: Vec<Arc<Message>> = vec![
            Message::user(r#"Deploy "heron" from https://example.com/releases/v2.tar.gz please"#),
            Message::ToolResult {
                call_id: CallId::new("c1"),
                name: "read".into(),
                content: "The deploy key fingerprint is FP-77A1-QX and the build lives at \
                          /srv/builds/heron-42. It took 3.5 s and used 512 MiB, 12% of the \
                          host; commit 9f3c2ab. See notes.txt."
                    .into(),
                is_error: false,
            },
            Message::assistant("The key is FP-77A1-QX; error E0382 is fixed.", Vec::new()),
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
        let facts = extract(&messages);
        let found = texts(&facts);
        assert_eq!(
            found[0], "FP-77A1-QX",
            "mentioned twice, it ranks first: {found:?}"
        );
        for expected in [
            "/srv/builds/heron-42",
            "https://example.com/releases/v2.tar.gz",
            "3.5 s",
            "512 MiB",
            "12%",
            "9f3c2ab",
            "E0382",
            "notes.txt",
            "heron",
        ] {
            assert!(found.contains(&expected), "{expected} in {found:?}");
        }
        assert!(
            !found.contains(&"/releases/v2.tar.gz"),
            "a URL's path is the URL's"
        );
        assert!(
            !found.iter().any(|f| *f == "The" || *f == "deploy"),
            "{found:?}"
        );
    }

    #[test]
    fn a_command_is_kept_with_its_exit_status() {
        let call = |id: &str, command: &str| ToolCall {
            id: CallId::new(id),
            name: "bash".into(),
            arguments: serde_json::json!({ "command": command }).to_string(),
        };
        let result = |id: &str, content: &str, is_error: bool| Message::ToolResult {
            call_id: CallId::new(id),
            name: "bash".into(),
            content: content.into(),
            is_error,
        };
        let messages: Vec<Arc<Message>> = vec![
            Message::assistant("", vec![call("a", "make test"), call("b", "cargo build")]),
            result("a", "the command exited with 2\nFAILED", true),
            result("b", "Finished", false),
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
        let shown: Vec<String> = extract(&messages)
            .iter()
            .filter(|f| matches!(f.kind, Kind::Command { .. }))
            .map(Fact::shown)
            .collect();
        assert!(
            shown.contains(&"ran `make test` (exit 2)".to_owned()),
            "{shown:?}"
        );
        assert!(
            shown.contains(&"ran `cargo build` (exit 0)".to_owned()),
            "{shown:?}"
        );
    }

    #[test]
    fn what_the_summary_kept_adds_nothing_and_the_budget_bounds_the_rest() {
        let messages = vec![Arc::new(Message::user(
            "ids AB-1234, CD-5678 and EF-9012 at /srv/a",
        ))];
        let facts = extract(&messages);
        let (kept, dropped) = left_out(facts.clone(), "AB-1234 CD-5678 EF-9012 /srv/a", 10);
        assert!(kept.is_empty() && dropped.is_empty());
        assert_eq!(block(&kept), "");
        let (kept, dropped) = left_out(facts, "only AB-1234", 2);
        assert_eq!(kept.len(), 2);
        assert_eq!(dropped.len(), 1);
        assert!(block(&kept).starts_with(FACTS_HEADING));
    }
}
