//! A scripted OpenAI-compatible model server on 127.0.0.1, for tests and benchmarks.
//!
//! It speaks the chat-completions wire format, streamed (SSE) and not, and Anthropic's
//! Messages and OpenAI's Responses formats streamed, answering each request (in the format of
//! the path it came to) with the next [`Reply`] of its script, and records every request body. Replies can carry
//! faults: an error status with Retry-After, a stream cut mid-way, a malformed chunk, raw bytes
//! split anywhere (a UTF-8 character across two network writes), pauses.
//!
//! Every test that uses it should end with [`ScriptedModelServer::assert_no_orphans`]: no
//! request it received may hold a tool call without its result or a result without its call.
//! Like llama.cpp's server, it answers HTTP 500 to a request whose history replays a tool call
//! with arguments that are not JSON, or without a name ([`Reply::cut_at_output_limit`] makes
//! the model produce such calls).

mod answer;
mod anthropic;
pub mod otlp;
mod pairing;
pub mod postgres;
mod reply;
mod responses;
pub mod runaway;
mod strict;
mod tree;
pub use strict::SECOND_SYSTEM_REFUSED;
pub use tree::{tree_of, Tree};

pub use pairing::pairing_faults;
pub use reply::{Format, Gate, Part, Reply};
pub use responses::encrypted_reasoning;

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;

type Body = BoxBody<Bytes, std::io::Error>;

/// Serves HTTP/1.1 on `listener`, each request answered by `handle`, until aborted.
pub(crate) fn serve<B, F, Fut>(listener: TcpListener, handle: F) -> tokio::task::JoinHandle<()>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    F: Fn(Request<hyper::body::Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<B>> + Send + 'static,
{
    tokio::spawn(async move {
        while let Ok((stream, peer)) = listener.accept().await {
            let handle = handle.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |mut req: Request<_>| {
                    req.extensions_mut().insert(Peer(peer));
                    let answered = handle(req);
                    async move { Ok::<_, std::convert::Infallible>(answered.await) }
                });
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!("test server connection ended: {e}");
                }
            });
        }
    })
}

/// The client's address of the connection a request came on.
#[derive(Clone, Copy, Debug)]
struct Peer(SocketAddr);

/// Answers some requests out of the script's order (say, every summary request).
pub type Router = Arc<dyn Fn(&Value) -> Option<Reply> + Send + Sync>;

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Reply>>,
    router: Option<Router>,
    requests: Mutex<Vec<Value>>,
    /// Every request's path, headers and arrival, in order.
    captured: Mutex<Vec<Captured>>,
    /// Woken at every request received.
    arrived: tokio::sync::Notify,
    /// When each request's answer was sent to its end, by the request's index.
    finished: Mutex<std::collections::HashMap<usize, std::time::Instant>>,
}

/// What the server saw of one request besides its body.
#[derive(Clone, Debug)]
pub struct Captured {
    pub path: String,
    /// Header names lower-cased, in the order received.
    pub headers: Vec<(String, String)>,
    /// When it arrived (its headers).
    pub at: std::time::Instant,
    /// The body's size in bytes.
    pub bytes: usize,
    /// The client's address: requests from one address came on one connection.
    pub peer: Option<SocketAddr>,
}

impl Captured {
    /// What a request arriving now shows before its body.
    fn of<B>(req: &Request<B>) -> Captured {
        Captured {
            path: req.uri().path().to_owned(),
            headers: req
                .headers()
                .iter()
                .map(|(n, v)| {
                    (
                        n.as_str().to_owned(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            at: std::time::Instant::now(),
            bytes: 0,
            peer: req.extensions().get::<Peer>().map(|p| p.0),
        }
    }

    /// The value of header `name` (lower-case), if it was sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The server. It stops when dropped.
pub struct ScriptedModelServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_loop: tokio::task::JoinHandle<()>,
}

impl ScriptedModelServer {
    /// Starts a server on 127.0.0.1 with a free port, answering with `script` in order.
    pub async fn start(script: impl IntoIterator<Item = Reply>) -> Self {
        Self::start_routed(script, None).await
    }

    /// As [`ScriptedModelServer::start`]; a request `router` answers is answered so, and the
    /// others take the script's next reply.
    pub async fn start_routed(
        script: impl IntoIterator<Item = Reply>,
        router: Option<Router>,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let shared = Arc::new(Shared {
            router,
            ..Shared::default()
        });
        shared.script.lock().expect("script lock").extend(script);
        let serving = shared.clone();
        let accept_loop = serve(listener, move |req| {
            let shared = serving.clone();
            async move { answer(shared, req).await }
        });
        Self {
            addr,
            shared,
            accept_loop,
        }
    }

    /// When the answer to the request at `index` (as [`Self::captured`] orders them) was sent
    /// to its end; `None` while it is not.
    pub fn finished(&self, index: usize) -> Option<std::time::Instant> {
        let finished = self.shared.finished.lock().expect("finished lock");
        finished.get(&index).copied()
    }

    /// The base URL to configure as `model.base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request body received so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().expect("requests lock").clone()
    }

    /// The path, headers and arrival time of every request so far, in order.
    pub fn captured(&self) -> Vec<Captured> {
        self.shared.captured.lock().expect("captured lock").clone()
    }

    /// Waits until `n` requests have been received in all.
    pub async fn wait_for_requests(&self, n: usize) {
        loop {
            let arrived = self.shared.arrived.notified();
            if self.shared.requests.lock().expect("requests lock").len() >= n {
                return;
            }
            arrived.await;
        }
    }

    /// Panics if any chat request received held an orphaned tool call or result.
    pub fn assert_no_orphans(&self) {
        for (i, request) in self.requests().iter().enumerate() {
            let faults = match request.get("input") {
                // A Responses request: its items are checked as the real server checks them.
                Some(Value::Array(items)) if items.iter().any(Value::is_object) => {
                    responses::refusal(request).into_iter().collect()
                }
                // An /embeddings request: no conversation in it.
                Some(_) => continue,
                None => pairing_faults(request),
            };
            assert!(
                faults.is_empty(),
                "request {i} has tool call/result pairing faults: {faults:?}\n{request:#}"
            );
        }
    }
}

impl Drop for ScriptedModelServer {
    fn drop(&mut self) {
        self.accept_loop.abort();
    }
}

/// Why the server refuses `json` before answering, as the real one would: like llama.cpp
/// (HTTP 500, or 400 for a strict chat template) and OpenAI's Responses API (HTTP 400), a
/// history it cannot accept.
fn refusal(format: Format, json: &Value) -> Option<(u16, String)> {
    match format {
        Format::OpenAi => strict::refusal(json),
        Format::Responses => {
            (strict::input_refusal(json)).or_else(|| responses::refusal(json).map(|why| (400, why)))
        }
        Format::Anthropic => None,
    }
}

/// The output limit a request asks for, in whichever field its format has it.
fn output_limit(json: &Value) -> Option<u64> {
    ["max_output_tokens", "max_tokens", "max_completion_tokens"]
        .iter()
        .find_map(|key| json.get(*key).and_then(Value::as_u64))
}

/// The models the server lists (`GET /models`, as OpenAI-compatible servers and Anthropic
/// answer it): the one every test home asks for.
const LISTED_MODELS: &str =
    r#"{"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "ryvos"}]}"#;

async fn answer(shared: Arc<Shared>, req: Request<hyper::body::Incoming>) -> Response<Body> {
    if req.method() == hyper::Method::GET && req.uri().path().ends_with("/models") {
        return plain(200, LISTED_MODELS);
    }
    let mut captured = Captured::of(&req);
    let format = if captured.path.ends_with("/messages") {
        Format::Anthropic
    } else if captured.path.ends_with("/responses") {
        Format::Responses
    } else {
        Format::OpenAi
    };
    let body = match req.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => return plain(400, &format!("could not read the request body: {e}")),
    };
    captured.bytes = body.len();
    let json: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    let streamed = json.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let limit_asked = output_limit(&json);
    let refused = refusal(format, &json);
    let routed = refused
        .is_none()
        .then(|| shared.router.as_ref().and_then(|route| route(&json)))
        .flatten();
    let index = {
        // Both logs under one lock, so their indices always agree.
        let mut log = shared.captured.lock().expect("captured lock");
        log.push(captured);
        shared.requests.lock().expect("requests lock").push(json);
        log.len() - 1
    };
    shared.arrived.notify_waiters();
    if let Some((status, why)) = refused {
        let body =
            serde_json::json!({"error": {"code": status, "message": why, "type": "server_error"}});
        return plain(status, &body.to_string());
    }
    let next = routed.or_else(|| shared.script.lock().expect("script lock").pop_front());
    let Some(reply) = next else {
        return plain(
            500,
            "{\"error\":{\"message\":\"the scripted server has no reply left for this request\"}}",
        );
    };
    if let Some(gate) = &reply.gate {
        gate.passed().await;
    }
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let linger = reply.linger;
    let (status, headers, mut parts, cut) = reply
        .for_request_of(body.len(), limit_asked)
        .render(streamed, format);
    if !linger.is_zero() {
        parts.push(Part::Pause(linger));
    }
    let mut response = Response::builder().status(status);
    for (name, value) in headers {
        response = response.header(name, value);
    }
    // The answer's end is noted when its last frame has been handed over.
    let noted = move || {
        let now = std::time::Instant::now();
        shared
            .finished
            .lock()
            .expect("finished lock")
            .insert(index, now);
    };
    response
        .body(BodyExt::boxed(StreamBody::new(frames(parts, cut, noted))))
        .unwrap_or_else(|e| plain(500, &format!("building the reply: {e}")))
}

/// A reply's body as it is sent: its parts with their pauses, then, if `cut`, a broken
/// connection; `ended` is called when the last part has been handed over.
fn frames(
    parts: Vec<Part>,
    cut: bool,
    ended: impl FnOnce() + Send + 'static,
) -> impl futures_util::Stream<Item = Result<Frame<Bytes>, std::io::Error>> {
    futures_util::stream::unfold(
        (VecDeque::from(parts), cut, Some(ended)),
        |(mut parts, cut, mut ended)| async move {
            loop {
                match parts.pop_front() {
                    Some(Part::Pause(d)) => tokio::time::sleep(d).await,
                    Some(Part::Bytes(b)) => {
                        return Some((Ok(Frame::data(b)), (parts, cut, ended)));
                    }
                    None => {
                        if let Some(ended) = ended.take() {
                            ended();
                        }
                        if !cut {
                            return None;
                        }
                        let error = std::io::Error::new(
                            std::io::ErrorKind::ConnectionAborted,
                            "scripted cut",
                        );
                        return Some((Err(error), (parts, false, None)));
                    }
                }
            }
        },
    )
}

fn plain(status: u16, text: &str) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(text.to_owned()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    response
}
