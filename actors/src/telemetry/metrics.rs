//! The metrics: the GenAI client metrics (`gen_ai.client.token.usage`,
//! `gen_ai.client.operation.duration`), tool call durations, runs by status and parks by
//! reason, and gauges
//! read at each export.

use opentelemetry::metrics::{Counter, Histogram, Meter};

/// Bucket boundaries the GenAI conventions advise for token counts.
const TOKEN_BUCKETS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

/// Bucket boundaries the GenAI conventions advise for durations, in seconds.
const SECOND_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

pub(crate) struct Instruments {
    pub token_usage: Histogram<u64>,
    pub operation_duration: Histogram<f64>,
    pub tool_duration: Histogram<f64>,
    pub runs: Counter<u64>,
    pub runs_parked: Counter<u64>,
}

impl Instruments {
    pub(crate) fn new(meter: &Meter) -> Instruments {
        Instruments {
            token_usage: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Tokens used per model call, by type")
                .with_boundaries(TOKEN_BUCKETS.to_vec())
                .build(),
            operation_duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("How long each model call took")
                .with_boundaries(SECOND_BUCKETS.to_vec())
                .build(),
            tool_duration: meter
                .f64_histogram("ryvos.tool.duration")
                .with_unit("s")
                .with_description("How long each tool call took")
                .with_boundaries(SECOND_BUCKETS.to_vec())
                .build(),
            runs: meter
                .u64_counter("ryvos.runs")
                .with_unit("{run}")
                .with_description("Runs ended, by status")
                .build(),
            runs_parked: meter
                .u64_counter("ryvos.runs.parked")
                .with_unit("{run}")
                .with_description("Runs parked at a budget, by reason")
                .build(),
        }
    }
}

/// Reports `read()` as the gauge `name` at each export; `None` reports nothing. `read` runs on
/// the exporter's thread: it must be quick and must not block.
pub(crate) fn observe(
    meter: &Meter,
    name: &'static str,
    unit: &'static str,
    description: &'static str,
    read: impl Fn() -> Option<u64> + Send + Sync + 'static,
) {
    // The SDK keeps the callback for the meter's life; the instrument's handle is not needed.
    meter
        .u64_observable_gauge(name)
        .with_unit(unit)
        .with_description(description)
        .with_callback(move |observer| {
            if let Some(value) = read() {
                observer.observe(value, &[]);
            }
        })
        .build();
}
