//! `[otel]`: OpenTelemetry traces and metrics, exported over OTLP. Off unless enabled.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How spans and metrics reach a collector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OtlpProtocol {
    /// OTLP over HTTP, protobuf bodies (`/v1/traces`, `/v1/metrics`).
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// OTLP over gRPC: not built into this Ryvos (refused at start, saying so).
    #[serde(rename = "grpc")]
    Grpc,
}

/// `[otel]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OtelConfig {
    /// Export at all. Off, nothing is built and nothing is paid per event.
    pub enabled: bool,
    /// The collector's base URL (`/v1/traces` and `/v1/metrics` are added). Empty: the
    /// standard `OTEL_EXPORTER_OTLP_ENDPOINT` variables, else `http://localhost:4318`.
    pub endpoint: String,
    pub protocol: OtlpProtocol,
    /// Sent with every export (an API key, a tenant); `${VAR}` is expanded.
    /// `OTEL_EXPORTER_OTLP_HEADERS` adds to them.
    pub headers: BTreeMap<String, String>,
    /// The service name spans carry. Empty: `OTEL_SERVICE_NAME`, else `ryvos`.
    pub service_name: String,
    /// Put message contents, tool arguments and tool results on spans. Off: they may hold
    /// secrets.
    pub capture_content: bool,
}
