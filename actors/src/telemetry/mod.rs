//! OpenTelemetry: traces and metrics of runs, model calls and tool calls, in the GenAI
//! semantic conventions, exported over OTLP/HTTP.
//!
//! Off by default, and then nothing here exists: the engine holds `None`, and every place that
//! would make a span checks that first, so nothing is allocated per event. On, spans and
//! metric points are handed to the SDK's batching processors, which export from threads of
//! their own: a collector that is slow or down never slows a run; what cannot be queued is
//! dropped, and said once in the log.

mod delivery;
mod http;
mod metrics;
mod names;
mod parent;
mod run_trace;

pub use parent::TraceParent;
pub(crate) use run_trace::{ChatEnd, ChatInput, ChatSpan, RunTrace, StepSpan};

use crate::config::{expand_env, OtelConfig, OtlpProtocol};
use delivery::{CountEnded, Delivery, WatchedMetrics, WatchedSpans};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use std::collections::HashMap;
use std::sync::Arc;

/// What could not be set up; the message names the `[otel]` key to fix.
#[derive(Debug, thiserror::Error)]
#[error("[otel] {0}")]
pub struct TelemetryError(String);

/// The exporters and what makes spans and metric points: held by the engine while `[otel]
/// enabled`.
pub(crate) struct Telemetry {
    tracer: SdkTracer,
    traces: SdkTracerProvider,
    metrics: SdkMeterProvider,
    pub(crate) instruments: metrics::Instruments,
    /// What makes the gauges.
    meter: opentelemetry::metrics::Meter,
    /// Whether spans reach the collector, and how many did not.
    spans: Arc<Delivery>,
    /// Message contents, tool arguments and results go on spans.
    pub capture_content: bool,
}

impl Telemetry {
    /// The exporters `config` asks for, sending on `runtime`; `None` when it is off.
    pub(crate) fn start(
        config: &OtelConfig,
        runtime: tokio::runtime::Handle,
    ) -> Result<Option<Telemetry>, TelemetryError> {
        if !config.enabled {
            return Ok(None);
        }
        if config.protocol == OtlpProtocol::Grpc {
            return Err(TelemetryError(
                "protocol = \"grpc\" is not built into this Ryvos; use \"http/protobuf\" \
                 (every OTLP collector takes it, on port 4318)"
                    .into(),
            ));
        }
        let headers = headers(config)?;
        let client = http::RuntimeClient::new(runtime)
            .map_err(|e| TelemetryError(format!("making the exporter's HTTP client: {e}")))?;
        let endpoint = |signal: &str| {
            let base = config.endpoint.trim_end_matches('/');
            (!base.is_empty()).then(|| format!("{base}/v1/{signal}"))
        };
        let built = |e: opentelemetry_otlp::ExporterBuildError| {
            TelemetryError(format!("building the OTLP exporter: {e} (check endpoint and the OTEL_EXPORTER_OTLP_* variables)"))
        };
        let mut spans = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client.clone())
            .with_headers(headers.clone());
        if let Some(url) = endpoint("traces") {
            spans = spans.with_endpoint(url);
        }
        let mut points = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_headers(headers);
        if let Some(url) = endpoint("metrics") {
            points = points.with_endpoint(url);
        }
        let resource = resource(config);
        let delivery = Delivery::new("spans");
        let batches = BatchSpanProcessor::builder(WatchedSpans {
            inner: spans.build().map_err(built)?,
            delivery: delivery.clone(),
        })
        .build();
        let traces = SdkTracerProvider::builder()
            .with_span_processor(CountEnded {
                inner: batches,
                delivery: delivery.clone(),
            })
            .with_resource(resource.clone())
            .build();
        let metrics = SdkMeterProvider::builder()
            .with_periodic_exporter(WatchedMetrics {
                inner: points.build().map_err(built)?,
                delivery: Delivery::new("metric points"),
            })
            .with_resource(resource)
            .build();
        let meter = metrics.meter("ryvos");
        let instruments = metrics::Instruments::new(&meter);
        Ok(Some(Telemetry {
            instruments,
            meter,
            spans: delivery,
            tracer: traces.tracer("ryvos"),
            traces,
            metrics,
            capture_content: config.capture_content,
        }))
    }

    /// Spans ended that have not reached the collector: exact after [`Self::shutdown`],
    /// before it those still queued count too.
    #[cfg(test)]
    pub(crate) fn spans_lost(&self) -> u64 {
        self.spans.lost()
    }

    /// What makes spans.
    pub(crate) fn tracer(&self) -> &SdkTracer {
        &self.tracer
    }

    /// Reports `read()` as the gauge `name` (in `unit`) at each export; `None` reports nothing.
    /// `read` runs on the exporter's thread: it must be quick and must not block.
    pub(crate) fn gauge(
        &self,
        name: &'static str,
        unit: &'static str,
        description: &'static str,
        read: impl Fn() -> Option<u64> + Send + Sync + 'static,
    ) {
        metrics::observe(&self.meter, name, unit, description, read);
    }

    /// Exports what is still queued and stops the exporters, off the async workers (the
    /// SDK's last flush blocks, up to the exporters' timeouts).
    pub(crate) async fn close(self: Arc<Self>) {
        if let Err(e) = tokio::task::spawn_blocking(move || self.shutdown()).await {
            tracing::warn!("flushing telemetry: {e}");
        }
    }

    /// Exports what is still queued and stops the exporters. Blocking (up to the exporters'
    /// timeouts): call it off the async workers.
    pub(crate) fn shutdown(&self) {
        if let Err(e) = self.traces.shutdown() {
            tracing::warn!("flushing the last spans: {e}");
        }
        let lost = self.spans.lost();
        if lost > 0 {
            tracing::warn!(
                "telemetry: {lost} span(s) never reached the collector (it was down or slow, \
                 or the export queue was full)"
            );
        }
        if let Err(e) = self.metrics.shutdown() {
            tracing::warn!("flushing the last metric points: {e}");
        }
    }
}

/// `[otel] headers`, their `${VAR}`s expanded. (`OTEL_EXPORTER_OTLP_HEADERS` is added by the
/// exporter.)
fn headers(config: &OtelConfig) -> Result<HashMap<String, String>, TelemetryError> {
    config
        .headers
        .iter()
        .map(|(name, value)| {
            let key = format!("otel.headers.{name}");
            expand_env(value, &key)
                .map(|value| (name.clone(), value))
                .map_err(|e| TelemetryError(e.to_string()))
        })
        .collect()
}

/// Who the spans come from: `[otel] service_name`, else `OTEL_SERVICE_NAME`, else `ryvos`.
fn resource(config: &OtelConfig) -> Resource {
    let builder = Resource::builder();
    let from_env = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|v| !v.is_empty());
    if !config.service_name.is_empty() {
        builder
            .with_service_name(config.service_name.clone())
            .build()
    } else if from_env {
        builder.build()
    } else {
        builder.with_service_name("ryvos").build()
    }
}

#[cfg(test)]
mod tests;
