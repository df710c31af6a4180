//! An OTLP/HTTP collector on 127.0.0.1 for tests: it decodes the official protobuf messages
//! (`/v1/traces`, `/v1/metrics`) and keeps what it received.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::AnyValue;
use prost::Message;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;

/// An attribute's value, as a test compares it.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    List(Vec<Attr>),
    Other,
}

/// One span as the collector received it.
#[derive(Clone, Debug)]
pub struct ReceivedSpan {
    pub name: String,
    pub trace_id: Vec<u8>,
    pub span_id: Vec<u8>,
    /// Empty for a root span.
    pub parent_span_id: Vec<u8>,
    /// The protobuf's `SpanKind` number (1 internal, 3 client).
    pub kind: i32,
    pub attributes: BTreeMap<String, Attr>,
    /// Event names, in order.
    pub events: Vec<String>,
    /// The status code number (2: error).
    pub status: i32,
    pub service_name: Option<String>,
}

impl ReceivedSpan {
    pub fn attr(&self, key: &str) -> Option<&Attr> {
        self.attributes.get(key)
    }

    pub fn text(&self, key: &str) -> Option<&str> {
        match self.attributes.get(key) {
            Some(Attr::Text(t)) => Some(t),
            _ => None,
        }
    }
}

#[derive(Default)]
struct Received {
    spans: Vec<ReceivedSpan>,
    metrics: Vec<String>,
}

/// The collector; stops when dropped.
pub struct OtlpReceiver {
    addr: SocketAddr,
    received: Arc<Mutex<Received>>,
    accept_loop: tokio::task::JoinHandle<()>,
}

impl OtlpReceiver {
    pub async fn start() -> OtlpReceiver {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let received = Arc::new(Mutex::new(Received::default()));
        let keeping = received.clone();
        let accept_loop = crate::serve(listener, move |req| {
            let keeping = keeping.clone();
            async move { take(&keeping, req).await }
        });
        OtlpReceiver {
            addr,
            received,
            accept_loop,
        }
    }

    /// The base URL to configure as `[otel] endpoint`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.lock().spans.clone()
    }

    /// The names of every metric received so far (one per data set exported).
    pub fn metric_names(&self) -> Vec<String> {
        self.lock().metrics.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Received> {
        self.received.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.accept_loop.abort();
    }
}

async fn take(
    received: &Mutex<Received>,
    req: Request<hyper::body::Incoming>,
) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    let body = match req.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return status(StatusCode::BAD_REQUEST),
    };
    let mut received = received.lock().unwrap_or_else(|e| e.into_inner());
    match path.as_str() {
        "/v1/traces" => match ExportTraceServiceRequest::decode(body) {
            Ok(export) => received.spans.extend(spans(export)),
            Err(_) => return status(StatusCode::BAD_REQUEST),
        },
        "/v1/metrics" => match ExportMetricsServiceRequest::decode(body) {
            Ok(export) => received.metrics.extend(
                export
                    .resource_metrics
                    .into_iter()
                    .flat_map(|r| r.scope_metrics)
                    .flat_map(|s| s.metrics)
                    .map(|m| m.name),
            ),
            Err(_) => return status(StatusCode::BAD_REQUEST),
        },
        _ => return status(StatusCode::NOT_FOUND),
    }
    // An empty body decodes as the empty Export*ServiceResponse.
    status(StatusCode::OK)
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = code;
    response.headers_mut().insert(
        "content-type",
        "application/x-protobuf".parse().expect("a header value"),
    );
    response
}

fn spans(export: ExportTraceServiceRequest) -> Vec<ReceivedSpan> {
    let mut out = Vec::new();
    for resource in export.resource_spans {
        let service_name = resource.resource.as_ref().and_then(|r| {
            r.attributes
                .iter()
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| match value(kv.value.as_ref()) {
                    Attr::Text(t) => Some(t),
                    _ => None,
                })
        });
        for scope in resource.scope_spans {
            for span in scope.spans {
                out.push(ReceivedSpan {
                    name: span.name,
                    trace_id: span.trace_id,
                    span_id: span.span_id,
                    parent_span_id: span.parent_span_id,
                    kind: span.kind,
                    attributes: span
                        .attributes
                        .iter()
                        .map(|kv| (kv.key.clone(), value(kv.value.as_ref())))
                        .collect(),
                    events: span.events.into_iter().map(|e| e.name).collect(),
                    status: span.status.map_or(0, |s| s.code),
                    service_name: service_name.clone(),
                });
            }
        }
    }
    out
}

fn value(v: Option<&AnyValue>) -> Attr {
    match v.and_then(|v| v.value.as_ref()) {
        Some(Any::StringValue(s)) => Attr::Text(s.clone()),
        Some(Any::IntValue(i)) => Attr::Int(*i),
        Some(Any::DoubleValue(f)) => Attr::Float(*f),
        Some(Any::BoolValue(b)) => Attr::Bool(*b),
        Some(Any::ArrayValue(list)) => {
            Attr::List(list.values.iter().map(|v| value(Some(v))).collect())
        }
        _ => Attr::Other,
    }
}
