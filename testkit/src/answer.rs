//! A scripted answer's content, and the pieces every format renders it with: the
//! layer under each format's module (OpenAI's in reply.rs, Anthropic's, Responses').

/// A scripted answer's content, as every format renders it.
pub(crate) struct Answer<'a> {
    pub deltas: &'a [String],
    pub calls: &'a [(String, String, String)],
    pub usage: Option<(u64, u64)>,
    pub cut_at_limit: bool,
    /// In the Responses format, a reasoning item first, with this id.
    pub reasoning: Option<&'a str>,
    /// In the Responses format, shaped as llama.cpp sends it, with the request's output limit.
    pub llama_cpp: Option<Option<u64>>,
}

/// Each `(name, data)` pair as the text of one SSE event with its name.
pub(crate) fn named_events(events: Vec<(String, String)>) -> Vec<String> {
    events
        .into_iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

/// `text` in three pieces cut on character boundaries (some may be empty): how a call's
/// arguments are streamed, in every format.
pub(crate) fn thirds(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let third = chars.len().div_ceil(3);
    (0..3)
        .map(|i| chars.iter().skip(i * third).take(third).collect())
        .collect()
}
