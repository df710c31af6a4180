//! The replies a scripted server gives.

use crate::answer::{named_events, thirds, Answer};
use bytes::Bytes;
use serde_json::{json, Value};
use std::time::Duration;

/// A gate a held reply waits at, opened by the test.
#[derive(Clone, Debug)]
pub struct Gate(std::sync::Arc<tokio::sync::watch::Sender<bool>>);

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self(std::sync::Arc::new(tokio::sync::watch::channel(false).0))
    }

    /// Opens the gate: every reply held at it goes out.
    pub fn open(&self) {
        self.0.send_replace(true);
    }

    pub(crate) async fn passed(&self) {
        let mut open = self.0.subscribe();
        // The sender lives in `self`, so waiting cannot fail.
        open.wait_for(|o| *o).await.ok();
    }
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

/// A piece of a response body.
#[derive(Clone, Debug)]
pub enum Part {
    /// Bytes written (and flushed) as one frame.
    Bytes(Bytes),
    /// A pause before the next part.
    Pause(Duration),
}

#[derive(Clone, Debug)]
enum Content {
    /// A chat answer, rendered as SSE chunks or one JSON completion.
    Chat {
        deltas: Vec<String>,
        calls: Vec<(String, String, String)>,
        usage: Option<(u64, u64)>,
        /// The answer stops at the output limit (`length`; Anthropic: `max_tokens`).
        cut_at_limit: bool,
    },
    /// `data:` payloads sent as they are, then `[DONE]` unless `cut` is set.
    Events(Vec<String>),
    /// A body sent byte for byte.
    Raw { status: u16, parts: Vec<Part> },
    /// An error status with the server's message, in the asking client's format.
    Error { status: u16, message: String },
}

/// The wire format a request asked in, by its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `/chat/completions` (and `/embeddings`).
    OpenAi,
    /// Anthropic's `/messages`.
    Anthropic,
    /// OpenAI's `/responses`.
    Responses,
}

/// One scripted answer.
#[derive(Clone, Debug)]
pub struct Reply {
    content: Content,
    headers: Vec<(String, String)>,
    pub(crate) delay: Duration,
    /// Answer only once this gate is open.
    pub(crate) gate: Option<Gate>,
    pause_between: Duration,
    /// Send only this many body parts, then break the connection.
    cut_after: Option<usize>,
    /// Report the request's size as its input, as a real server counts it.
    pub(crate) prompt_by_size: bool,
    /// How long the body stays open after its last part (its end marker, for a stream).
    pub(crate) linger: Duration,
    /// In the Responses format: a reasoning item with this id comes first.
    reasoning: Option<String>,
    /// In the Responses format: the events as llama.cpp sends them, with the output limit
    /// the request asked for (see [`Reply::shaped_like_llama_cpp`]).
    llama_cpp: Option<Option<u64>>,
}

/// The bytes per token of English prose in common BPE tokenizers, which
/// [`Reply::prompt_tokens_by_size`] reports.
const BYTES_PER_TOKEN: u64 = 4;

impl Reply {
    fn new(content: Content) -> Self {
        Self {
            content,
            headers: Vec::new(),
            delay: Duration::ZERO,
            gate: None,
            pause_between: Duration::ZERO,
            cut_after: None,
            prompt_by_size: false,
            linger: Duration::ZERO,
            reasoning: None,
            llama_cpp: None,
        }
    }

    /// In the Responses format, the events as llama.cpp's `/v1/responses` sends them: items
    /// known by their ids (no `output_index`), and an answer cut at the output limit ended
    /// `response.completed`, its output as long as the limit asked for.
    pub fn shaped_like_llama_cpp(mut self) -> Self {
        self.llama_cpp = Some(None);
        self
    }

    /// In the Responses format, the answer begins with reasoning item `id`, its encrypted
    /// content [`crate::encrypted_reasoning`]`(id)`; the other formats have no such items.
    pub fn reasoning(mut self, id: &str) -> Self {
        self.reasoning = Some(id.to_owned());
        self
    }

    /// A text answer streamed in these deltas.
    pub fn text(deltas: &[&str]) -> Self {
        Self::new(Content::Chat {
            deltas: deltas.iter().map(|d| d.to_string()).collect(),
            calls: Vec::new(),
            usage: Some((12, 5)),
            cut_at_limit: false,
        })
    }

    /// A script of `n` turns, each reading `{stem}{i}.txt` (call id `r{i}`), then `answer`.
    pub fn reads_then(n: usize, stem: &str, answer: &str) -> Vec<Reply> {
        (0..n)
            .map(|i| {
                let arguments = format!(r#"{{"path": "{stem}{i}.txt"}}"#);
                Reply::tool_calls(&[(&format!("r{i}"), "read", &arguments)])
            })
            .chain([Reply::text(&[answer])])
            .collect()
    }

    /// An answer with tool calls `(id, name, arguments)`. Each call's arguments are streamed in
    /// three fragments, the calls' fragments interleaved.
    pub fn tool_calls(calls: &[(&str, &str, &str)]) -> Self {
        Self::new(Content::Chat {
            deltas: Vec::new(),
            calls: calls
                .iter()
                .map(|(i, n, a)| (i.to_string(), n.to_string(), a.to_string()))
                .collect(),
            usage: Some((12, 5)),
            cut_at_limit: false,
        })
    }

    /// A text answer that then calls tools.
    pub fn text_then_tools(deltas: &[&str], calls: &[(&str, &str, &str)]) -> Self {
        let mut reply = Self::tool_calls(calls);
        if let Content::Chat { deltas: d, .. } = &mut reply.content {
            *d = deltas.iter().map(|s| s.to_string()).collect();
        }
        reply
    }

    /// SSE `data:` payloads, sent as given (then `[DONE]`).
    pub fn events(payloads: &[&str]) -> Self {
        Self::new(Content::Events(
            payloads.iter().map(|p| p.to_string()).collect(),
        ))
    }

    /// A body sent exactly as these parts, with `text/event-stream` and status 200.
    pub fn raw(parts: Vec<Part>) -> Self {
        Self::new(Content::Raw { status: 200, parts })
    }

    /// A JSON body with status 200 (an `/embeddings` answer, say).
    pub fn json(body: Value) -> Self {
        Self::new(Content::Raw {
            status: 200,
            parts: vec![Part::Bytes(Bytes::from(body.to_string()))],
        })
        .header("content-type", "application/json")
    }

    /// llama.cpp's answer to a request past its context window (HTTP 400, its sizes with it):
    /// `prompt` tokens asked, `n_ctx` the window.
    pub fn llama_cpp_overflow(prompt: u64, n_ctx: u64) -> Self {
        let body = serde_json::json!({"error": {
            "code": 400,
            "message": format!("request ({prompt} tokens) exceeds the available context size \
                                ({n_ctx} tokens), try increasing it"),
            "type": "exceed_context_size_error",
            "n_prompt_tokens": prompt,
            "n_ctx": n_ctx,
        }});
        Self::new(Content::Raw {
            status: 400,
            parts: vec![Part::Bytes(Bytes::from(body.to_string()))],
        })
        .header("content-type", "application/json")
    }

    /// An error answer, in the shape of the client's provider (OpenAI's or Anthropic's).
    pub fn error(status: u16, message: &str) -> Self {
        Self::new(Content::Error {
            status,
            message: message.to_owned(),
        })
    }

    /// Adds a response header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Adds `Retry-After: secs`.
    pub fn retry_after(self, secs: u64) -> Self {
        self.header("retry-after", &secs.to_string())
    }

    /// Sets the usage reported (none: the server sends no usage at all).
    pub fn usage(mut self, usage: Option<(u64, u64)>) -> Self {
        if let Content::Chat { usage: u, .. } = &mut self.content {
            *u = usage;
        }
        self
    }

    /// Reports the request's input as a real server would count it (a token per 4 bytes of
    /// the request's body), instead of a fixed figure.
    pub fn prompt_tokens_by_size(mut self) -> Self {
        self.prompt_by_size = true;
        self
    }

    /// The usage as reported for a request of `bytes`, asking for at most `max_output` tokens.
    pub(crate) fn for_request_of(mut self, bytes: usize, max_output: Option<u64>) -> Self {
        if let Some(limit) = self.llama_cpp.as_mut() {
            *limit = max_output;
        }
        if let (true, Content::Chat { usage, .. }) = (self.prompt_by_size, &mut self.content) {
            let output = usage.map_or(0, |(_, output)| output);
            *usage = Some((bytes as u64 / BYTES_PER_TOKEN, output));
        }
        self
    }

    /// Ends the answer at the output limit (`finish_reason: "length"`; Anthropic:
    /// `max_tokens`), as a server does when the model runs out of room mid-answer or
    /// mid-call.
    pub fn cut_at_output_limit(mut self) -> Self {
        if let Content::Chat { cut_at_limit, .. } = &mut self.content {
            *cut_at_limit = true;
        }
        self
    }

    /// Keeps the body open this long after its last part, as a server whose last chunk comes
    /// apart from the end marker does.
    pub fn linger(mut self, linger: Duration) -> Self {
        self.linger = linger;
        self
    }

    /// Waits this long before answering.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Holds the answer until `gate` is opened: the test decides when the run may go on.
    pub fn held(mut self, gate: &Gate) -> Self {
        self.gate = Some(gate.clone());
        self
    }

    /// Pauses this long between body parts (each SSE event is a part).
    pub fn pause_between(mut self, pause: Duration) -> Self {
        self.pause_between = pause;
        self
    }

    /// Sends `n` body parts, then breaks the connection.
    pub fn cut_after(mut self, n: usize) -> Self {
        self.cut_after = Some(n);
        self
    }

    /// Status, headers, body parts and whether to break the connection after them.
    pub(crate) fn render(
        self,
        streamed: bool,
        format: Format,
    ) -> (u16, Vec<(String, String)>, Vec<Part>, bool) {
        let mut headers = self.headers;
        let (status, mut parts) = match self.content {
            Content::Error { status, message } => {
                headers.push(("content-type".into(), "application/json".into()));
                let body = match format {
                    Format::OpenAi | Format::Responses => {
                        json!({"error": {"message": message, "type": "scripted_error"}}).to_string()
                    }
                    Format::Anthropic => crate::anthropic::error_body(status, &message),
                };
                (status, vec![Part::Bytes(Bytes::from(body))])
            }
            Content::Chat {
                deltas,
                calls,
                usage,
                cut_at_limit,
            } => {
                let answer = Answer {
                    deltas: &deltas,
                    calls: &calls,
                    usage,
                    cut_at_limit,
                    reasoning: self.reasoning.as_deref(),
                    llama_cpp: self.llama_cpp,
                };
                let (kind, parts) = body(&answer, streamed, format);
                headers.push(("content-type".into(), kind.into()));
                (200, parts)
            }
            Content::Events(payloads) => {
                headers.push(("content-type".into(), "text/event-stream".into()));
                (200, sse(payloads))
            }
            Content::Raw { status, parts } => {
                if !headers.iter().any(|(n, _)| n == "content-type") {
                    headers.push(("content-type".into(), "text/event-stream".into()));
                }
                (status, parts)
            }
        };
        if let Some(n) = self.cut_after {
            parts.truncate(n);
            // Let what was written reach the client before the connection breaks.
            parts.push(Part::Pause(Duration::from_millis(50)));
        }
        if !self.pause_between.is_zero() {
            parts = parts
                .into_iter()
                .flat_map(|p| [Part::Pause(self.pause_between), p])
                .collect();
        }
        (status, headers, parts, self.cut_after.is_some())
    }
}

/// `answer`'s body in `format` (as one JSON completion when a chat request is not
/// `streamed`): its content type and parts.
fn body(answer: &Answer, streamed: bool, format: Format) -> (&'static str, Vec<Part>) {
    let (deltas, calls, usage, cut) = (
        answer.deltas,
        answer.calls,
        answer.usage,
        answer.cut_at_limit,
    );
    match format {
        Format::Anthropic => {
            let events = crate::anthropic::events(deltas, calls, usage, cut);
            ("text/event-stream", named_sse(events))
        }
        Format::Responses => {
            let events = crate::responses::events(answer);
            let events = match answer.llama_cpp {
                Some(limit) => crate::responses::as_llama_cpp(events, limit),
                None => events,
            };
            ("text/event-stream", named_sse(events))
        }
        Format::OpenAi if !streamed => {
            let body = completion(&deltas.concat(), calls, usage, cut);
            (
                "application/json",
                vec![Part::Bytes(Bytes::from(body.to_string()))],
            )
        }
        Format::OpenAi => ("text/event-stream", sse(chunks(deltas, calls, usage, cut))),
    }
}

fn named_sse(events: Vec<(String, String)>) -> Vec<Part> {
    named_events(events)
        .into_iter()
        .map(|e| Part::Bytes(Bytes::from(e)))
        .collect()
}

fn sse(payloads: Vec<String>) -> Vec<Part> {
    payloads
        .into_iter()
        .chain(std::iter::once("[DONE]".to_string()))
        .map(|p| Part::Bytes(Bytes::from(format!("data: {p}\n\n"))))
        .collect()
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    })
    .to_string()
}

/// The SSE payloads of a chat answer, as OpenAI streams them.
fn chunks(
    deltas: &[String],
    calls: &[(String, String, String)],
    usage: Option<(u64, u64)>,
    cut_at_limit: bool,
) -> Vec<String> {
    let mut out = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    for d in deltas {
        out.push(chunk(json!({"content": d}), None));
    }
    for (index, (id, name, _)) in calls.iter().enumerate() {
        out.push(chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                                   "function": {"name": name, "arguments": ""}}]}),
            None,
        ));
    }
    // Arguments in three fragments per call, the calls interleaved.
    let fragments: Vec<Vec<String>> = calls.iter().map(|(_, _, a)| thirds(a)).collect();
    for round in 0..3 {
        for (index, parts) in fragments.iter().enumerate() {
            if !parts[round].is_empty() {
                out.push(chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": parts[round]}}]}),
                    None,
                ));
            }
        }
    }
    out.push(chunk(json!({}), Some(finish_reason(calls, cut_at_limit))));
    if let Some((prompt, completion)) = usage {
        out.push(
            json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0,
                   "model": "scripted", "choices": [],
                   "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion}})
            .to_string(),
        );
    }
    out
}

/// Why a chat answer stopped, as OpenAI says it.
fn finish_reason(calls: &[(String, String, String)], cut_at_limit: bool) -> &'static str {
    if cut_at_limit {
        "length"
    } else if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

fn completion(
    text: &str,
    calls: &[(String, String, String)],
    usage: Option<(u64, u64)>,
    cut_at_limit: bool,
) -> Value {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
        .collect();
    let mut message = json!({"role": "assistant", "content": text});
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    let mut body = json!({
        "id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": "scripted",
        "choices": [{"index": 0, "message": message,
                     "finish_reason": finish_reason(calls, cut_at_limit)}]
    });
    if let Some((p, c)) = usage {
        body["usage"] = json!({"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c});
    }
    body
}
