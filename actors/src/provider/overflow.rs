//! How servers say a request outgrew the model's context window, read by their codes and
//! shapes first and their words second, with the sizes they report:
//! - llama.cpp: `{"error": {"type": "exceed_context_size_error", "n_prompt_tokens": …,
//!   "n_ctx": …}}` (HTTP 400);
//! - OpenAI (and the Responses API's `response.failed`): code `context_length_exceeded`,
//!   "maximum context length is N tokens. However, your messages resulted in M tokens";
//! - vLLM: the error at the top level (`{"object": "error", "message": …}`), "maximum context
//!   length is N tokens. However, you requested M tokens";
//! - OpenRouter: "maximum context length is N tokens" under `error`;
//! - Ollama: "the input length exceeds the context length";
//! - Anthropic: `invalid_request_error`, "prompt is too long: M tokens > N maximum".

use serde_json::Value;

/// A request the model's context window cannot take: the server's words, and the sizes it
/// reported (its window, the request's tokens by its own count).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overflow {
    pub message: String,
    /// The model's context window, as the server reported it.
    pub window: Option<u64>,
    /// The request's size by the server's own count.
    pub prompt_tokens: Option<u64>,
}

/// Codes and types that mean an overflow, whatever the words.
const CODES: &[&str] = &[
    "context_length_exceeded",
    "exceed_context_size_error",
    "context_window_exceeded",
    "string_above_max_length",
];

/// Words that mean an overflow, where no code says so.
const PHRASES: &[&str] = &[
    "maximum context length",
    "context window",
    "context length",
    "context size",
    "prompt is too long",
    "too many tokens",
    "input is too long",
    "context limit",
    "exceeds the available context",
];

/// The overflow an error answer (`status`, `body`) stands for, if it is one.
pub(crate) fn from_answer(status: u16, body: &str) -> Option<Overflow> {
    if status != 400 && status != 413 && status != 422 {
        return None;
    }
    let value: Value = serde_json::from_str(body).ok()?;
    // Under `error` (OpenAI, llama.cpp, OpenRouter, Ollama, Anthropic), or at the top (vLLM).
    let error = match value.get("error") {
        Some(error) if error.is_object() => error,
        Some(Value::String(message)) => return from_words(message, ""),
        _ => &value,
    };
    from_error(error)
}

/// The overflow an error object (`message`, `code`, `type`, sizes) stands for, if it is one.
pub(crate) fn from_error(error: &Value) -> Option<Overflow> {
    let text = |key: &str| match error.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    let message = text("message");
    let code = format!("{} {}", text("code"), text("type"));
    let mut overflow = from_words(&message, &code)?;
    let number = |key: &str| error.get(key).and_then(Value::as_u64);
    overflow.window = number("n_ctx").or(overflow.window);
    overflow.prompt_tokens = number("n_prompt_tokens").or(overflow.prompt_tokens);
    Some(overflow)
}

/// The overflow `message` (with `code`, its code and type) says, if it says one, with the
/// sizes its words give.
pub(crate) fn from_words(message: &str, code: &str) -> Option<Overflow> {
    let lower = format!("{code} {message}").to_lowercase();
    let by_code = CODES.iter().any(|c| lower.contains(c));
    if !by_code && !PHRASES.iter().any(|p| lower.contains(p)) {
        return None;
    }
    let (window, prompt_tokens) = sizes(&lower);
    Some(Overflow {
        message: message.to_owned(),
        window,
        prompt_tokens,
    })
}

/// The window and the request's size where the words give them: "maximum context length is N
/// tokens … (requested|resulted in) M tokens", "M tokens > N maximum", "request (M tokens)
/// exceeds the available context size (N tokens)".
fn sizes(lower: &str) -> (Option<u64>, Option<u64>) {
    let numbers: Vec<(usize, u64)> = numbers_before_tokens(lower);
    let find = |marks: &[&str]| {
        marks.iter().find_map(|mark| {
            let at = lower.find(mark)?;
            numbers.iter().find(|(pos, _)| *pos > at).map(|(_, n)| *n)
        })
    };
    if let Some(at) = lower.find(" tokens > ") {
        // Anthropic: "M tokens > N maximum".
        let before = numbers
            .iter()
            .rev()
            .find(|(pos, _)| *pos < at)
            .map(|(_, n)| *n);
        let after: Option<u64> = lower[at + " tokens > ".len()..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok());
        return (after, before);
    }
    let window = find(&[
        "context length is",
        "context size (",
        "context window of",
        "context length of",
    ]);
    // vLLM's "requested M tokens (P in the messages, C in the completion)" counts the output
    // asked for too: the prompt is P.
    let in_messages = lower.find(" in the messages").and_then(|at| {
        let digits: String = lower[..at]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .filter(char::is_ascii_digit)
            .collect();
        digits.chars().rev().collect::<String>().parse().ok()
    });
    let prompt = in_messages.or_else(|| find(&["resulted in", "request (", "requested"]));
    (window, prompt)
}

/// Every number followed by " tokens" in `text`, with where it starts.
fn numbers_before_tokens(text: &str) -> Vec<(usize, u64)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b',') {
                i += 1;
            }
            let digits: String = text[start..i]
                .chars()
                .filter(char::is_ascii_digit)
                .collect();
            if text[i..].starts_with(" tokens") || text[i..].starts_with(" token") {
                if let Ok(n) = digits.parse() {
                    found.push((start, n));
                }
            }
        } else {
            i += 1;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_servers_overflow_is_read_with_its_sizes() {
        let llama = r#"{"error":{"code":400,"type":"exceed_context_size_error","message":"request (12238 tokens) exceeds the available context size (8192 tokens), try increasing it","n_prompt_tokens":12238,"n_ctx":8192}}"#;
        let o = from_answer(400, llama).unwrap();
        assert_eq!((o.window, o.prompt_tokens), (Some(8192), Some(12238)));

        let openai = r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        let o = from_answer(400, openai).unwrap();
        assert_eq!((o.window, o.prompt_tokens), (Some(128000), Some(130532)));

        let vllm = r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#;
        let o = from_answer(400, vllm).unwrap();
        assert_eq!((o.window, o.prompt_tokens), (Some(4096), Some(4000)));

        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#;
        let o = from_answer(400, anthropic).unwrap();
        assert_eq!((o.window, o.prompt_tokens), (Some(200000), Some(208310)));

        let openrouter = r#"{"error":{"message":"This endpoint's maximum context length is 32768 tokens. However, you requested about 40211 tokens (40211 of text input). Please reduce the length of either one, or use the \"middle-out\" transform to compress your prompt automatically.","code":400}}"#;
        let o = from_answer(400, openrouter).unwrap();
        assert_eq!((o.window, o.prompt_tokens), (Some(32768), Some(40211)));

        let ollama = r#"{"error":{"message":"the input length exceeds the context length","type":"api_error"}}"#;
        assert!(from_answer(400, ollama).is_some());
    }

    #[test]
    fn other_errors_are_not_overflows() {
        let bad_tool =
            r#"{"error":{"message":"tools[0].name is invalid","type":"invalid_request_error"}}"#;
        assert_eq!(from_answer(400, bad_tool), None);
        let overloaded = r#"{"error":{"message":"maximum context length","type":"x"}}"#;
        assert_eq!(from_answer(503, overloaded), None, "not a 4xx");
        assert_eq!(from_answer(400, "not json"), None);
    }
}
