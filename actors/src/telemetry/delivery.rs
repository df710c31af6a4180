//! Whether spans and metric points reach the collector.
//!
//! The exporters are wrapped so that a collector that is down is said once when export starts
//! failing and once when it works again, not at every batch; the batching processor is
//! wrapped to count the spans that end, so that at shutdown the spans that never reached the
//! collector (queue full, collector down) are counted exactly.

use opentelemetry::Context;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use opentelemetry_sdk::Resource;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One signal's delivery: whether its last export failed, and what was ended and delivered.
#[derive(Debug)]
pub(crate) struct Delivery {
    /// "spans" or "metric points", for the log.
    what: &'static str,
    failing: AtomicBool,
    ended: AtomicU64,
    delivered: AtomicU64,
}

impl Delivery {
    pub(crate) fn new(what: &'static str) -> Arc<Delivery> {
        Arc::new(Delivery {
            what,
            failing: AtomicBool::new(false),
            ended: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
        })
    }

    /// Spans ended that never reached the collector. Exact once the exporter is shut down;
    /// before, it counts those still queued too.
    pub(crate) fn lost(&self) -> u64 {
        let ended = self.ended.load(Ordering::Relaxed);
        ended.saturating_sub(self.delivered.load(Ordering::Relaxed))
    }

    /// Takes in an export's result (of `count` spans): logs the change when export starts
    /// failing or works again. The failure is not passed on: the SDK would log every batch.
    fn exported(&self, count: usize, result: OTelSdkResult) -> OTelSdkResult {
        match result {
            Ok(()) => {
                self.delivered.fetch_add(count as u64, Ordering::Relaxed);
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!("telemetry: the collector takes {} again", self.what);
                }
            }
            Err(e) => {
                if !self.failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "telemetry: exporting {} failed ({e}); runs go on, and {} are dropped \
                         until the collector takes them again (check [otel] endpoint)",
                        self.what,
                        self.what
                    );
                }
            }
        }
        Ok(())
    }
}

/// A span exporter whose deliveries are watched.
#[derive(Debug)]
pub(crate) struct WatchedSpans<E> {
    pub inner: E,
    pub delivery: Arc<Delivery>,
}

impl<E: SpanExporter> SpanExporter for WatchedSpans<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let count = batch.len();
        let result = self.inner.export(batch).await;
        self.delivery.exported(count, result)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource)
    }
}

/// A span processor that counts the spans ending, before passing them on.
#[derive(Debug)]
pub(crate) struct CountEnded<P> {
    pub inner: P,
    pub delivery: Arc<Delivery>,
}

impl<P: SpanProcessor> SpanProcessor for CountEnded<P> {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx)
    }

    fn on_end(&self, span: SpanData) {
        self.delivery.ended.fetch_add(1, Ordering::Relaxed);
        self.inner.on_end(span)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource)
    }
}

/// A metric exporter whose deliveries are watched.
pub(crate) struct WatchedMetrics<E> {
    pub inner: E,
    pub delivery: Arc<Delivery>,
}

impl<E: PushMetricExporter> PushMetricExporter for WatchedMetrics<E> {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let result = self.inner.export(metrics).await;
        self.delivery.exported(0, result)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}
