//! The exporter's HTTP client: the engine's own reqwest client, driven on the runtime. The
//! SDK exports from threads of its own (off the hot path) and waits there; the request itself
//! runs on the runtime that owns the connection pool.

use bytes::Bytes;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use std::time::Duration;

/// The longest one export may take, connecting and reading the answer included: a collector
/// that hangs costs an export thread this long, never a run.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Debug)]
pub(super) struct RuntimeClient {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl RuntimeClient {
    pub(super) fn new(runtime: tokio::runtime::Handle) -> Result<RuntimeClient, reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .connect_timeout(EXPORT_TIMEOUT)
            .build()?;
        Ok(RuntimeClient { client, runtime })
    }
}

#[async_trait::async_trait]
impl HttpClient for RuntimeClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let outgoing = self
            .client
            .request(parts.method, parts.uri.to_string())
            .headers(parts.headers)
            .body(body);
        let sent = self.runtime.spawn(async move {
            let answer = outgoing.send().await?;
            let status = answer.status();
            let headers = answer.headers().clone();
            let body = answer.bytes().await?;
            Ok::<_, reqwest::Error>((status, headers, body))
        });
        let (status, headers, body) = sent.await??;
        let mut response = Response::new(body);
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        Ok(response)
    }
}
