//! Summaries: the dropped part of a conversation, compressed by the model into one message.
//!
//! The dropped messages go to the model as one plain transcript in a single user message, so
//! the request can never carry a call without its result, whatever was cut.

use crate::message::Message;
use crate::provider::ChatRequest;
use std::fmt::Write;
use std::sync::Arc;

/// What the summarizing model is told.
pub(crate) const SUMMARIZER_PROMPT: &str =
    "You summarize the earlier part of an agent's conversation \
so that the agent can go on without it. Keep every fact, decision, file path, command, result \
and open question the agent will need; drop chatter. Answer with the summary only, in at most \
250 words.";

/// The longest piece of one message put into the transcript, in characters.
const PIECE_CHARS: usize = 2000;

/// Marks the message that stands for a summarized part.
pub(crate) const SUMMARY_HEADING: &str = "[Summary of the earlier conversation]";

/// The request that asks for a summary of `dropped`.
pub(crate) fn request(dropped: &[Arc<Message>]) -> ChatRequest {
    ChatRequest {
        system: SUMMARIZER_PROMPT.into(),
        messages: Arc::new(vec![Arc::new(Message::user(format!(
            "Summarize this conversation:\n\n{}",
            transcript(dropped)
        )))]),
        tools: Arc::new(Vec::new()),
    }
}

/// The message that stands for the dropped part in the conversation.
pub(crate) fn message(summary: &str) -> Message {
    Message::System {
        content: format!("{SUMMARY_HEADING}\n{}", summary.trim()),
    }
}

/// Messages as a plain transcript, one line each (long ones clipped): what a model reads about
/// a conversation it is not part of.
pub(crate) fn transcript(messages: &[Arc<Message>]) -> String {
    let mut out = String::new();
    for m in messages {
        // Writing to a String cannot fail.
        let _ = match &**m {
            Message::User { content } => writeln!(out, "user: {}", clip(content)),
            Message::System { content } => writeln!(out, "note: {}", clip(content)),
            Message::Assistant {
                content,
                tool_calls,
                ..
            } => {
                let calls: Vec<String> = tool_calls
                    .iter()
                    .map(|c| format!("{}({})", c.name, clip(&c.arguments)))
                    .collect();
                if calls.is_empty() {
                    writeln!(out, "assistant: {}", clip(content))
                } else {
                    writeln!(
                        out,
                        "assistant: {} [called {}]",
                        clip(content),
                        calls.join(", ")
                    )
                }
            }
            Message::ToolResult {
                name,
                content,
                is_error,
                ..
            } => {
                let outcome = if *is_error { "failed" } else { "ok" };
                writeln!(out, "result of {name} ({outcome}): {}", clip(content))
            }
        };
    }
    out
}

fn clip(text: &str) -> &str {
    match text.char_indices().nth(PIECE_CHARS) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_is_one_transcript_without_tools() {
        let dropped = vec![
            Arc::new(Message::user("read the notes")),
            Arc::new(Message::ToolResult {
                call_id: crate::ids::CallId::new("c1"),
                name: "read".into(),
                content: "x".repeat(5000),
                is_error: false,
            }),
        ];
        let request = request(&dropped);
        assert_eq!(request.messages.len(), 1);
        assert!(request.tools.is_empty());
        let Message::User { content } = &*request.messages[0] else {
            panic!("a user message")
        };
        assert!(content.contains("user: read the notes"));
        assert!(content.contains("result of read (ok): "));
        assert!(content.len() < 2500, "long pieces are clipped");
        assert!(matches!(message(" s "), Message::System { content } if content.ends_with("\ns")));
    }
}
