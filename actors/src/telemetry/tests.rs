//! The exporters against a real OTLP/HTTP collector on 127.0.0.1.

use super::*;
use opentelemetry::trace::{Span as _, Tracer as _};
use ryvos_testkit::otlp::OtlpReceiver;

fn enabled(endpoint: &str) -> OtelConfig {
    OtelConfig {
        enabled: true,
        endpoint: endpoint.to_owned(),
        ..OtelConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn off_builds_nothing_and_grpc_is_refused_saying_so() {
    let handle = tokio::runtime::Handle::current();
    assert!(Telemetry::start(&OtelConfig::default(), handle.clone())
        .unwrap()
        .is_none());
    let grpc = OtelConfig {
        protocol: OtlpProtocol::Grpc,
        ..enabled("http://127.0.0.1:4317")
    };
    let refused = Telemetry::start(&grpc, handle).err().unwrap().to_string();
    assert!(
        refused.contains("[otel]") && refused.contains("http/protobuf"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn spans_reach_the_collector_with_the_service_name() {
    let collector = OtlpReceiver::start().await;
    let config = OtelConfig {
        service_name: "ryvos-test".into(),
        ..enabled(&collector.endpoint())
    };
    let telemetry = Telemetry::start(&config, tokio::runtime::Handle::current())
        .unwrap()
        .unwrap();
    let mut span = telemetry.tracer().start("probe");
    span.end();
    let telemetry = Arc::new(telemetry);
    telemetry.clone().close().await;
    assert_eq!(telemetry.spans_lost(), 0);
    let spans = collector.spans();
    assert_eq!(spans.len(), 1, "{spans:?}");
    assert_eq!(spans[0].name, "probe");
    assert_eq!(spans[0].service_name.as_deref(), Some("ryvos-test"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_collector_that_refuses_connections_costs_nothing_but_the_spans() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = enabled(&format!("http://127.0.0.1:{port}"));
    let telemetry = Telemetry::start(&config, tokio::runtime::Handle::current())
        .unwrap()
        .unwrap();
    for _ in 0..10 {
        let mut span = telemetry.tracer().start("lost");
        span.end();
    }
    // Ending spans never waited on the collector; the last flush gives up, and the spans
    // are counted as lost.
    let telemetry = Arc::new(telemetry);
    telemetry.clone().close().await;
    assert_eq!(telemetry.spans_lost(), 10);
}
