//! A caller's W3C trace context (`traceparent`): a run started with one is a child of the
//! caller's span, in the caller's trace.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry::Context;

/// A parsed `traceparent` header value.
#[derive(Clone, Debug)]
pub struct TraceParent(SpanContext);

impl TraceParent {
    /// Parses `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>` (a later version's value
    /// is read by the same first four fields, as the W3C specification says).
    pub fn parse(value: &str) -> Result<TraceParent, String> {
        let bad = || {
            format!(
                "traceparent '{value}' is not a W3C trace context: give \
                 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>"
            )
        };
        let fields: Vec<&str> = value.trim().split('-').collect();
        let [version, trace, span, flags, ..] = fields[..] else {
            return Err(bad());
        };
        let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
        let shaped = hex(version, 2) && hex(trace, 32) && hex(span, 16) && hex(flags, 2);
        if !shaped || version == "ff" || (version == "00" && fields.len() != 4) {
            return Err(bad());
        }
        let trace = TraceId::from_hex(trace).map_err(|_| bad())?;
        let span = SpanId::from_hex(span).map_err(|_| bad())?;
        let flags = u8::from_str_radix(flags, 16).map_err(|_| bad())?;
        if trace == TraceId::INVALID || span == SpanId::INVALID {
            return Err(bad());
        }
        Ok(TraceParent(SpanContext::new(
            trace,
            span,
            TraceFlags::new(flags),
            true,
            TraceState::default(),
        )))
    }

    /// The parent `span` makes.
    pub(crate) fn of(span: SpanContext) -> TraceParent {
        TraceParent(span)
    }

    /// The context a child span starts in.
    pub(crate) fn context(&self) -> Context {
        Context::new().with_remote_span_context(self.0.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::TraceParent;

    #[test]
    fn a_w3c_traceparent_parses_and_anything_else_is_refused_saying_what_to_give() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert!(TraceParent::parse(good).is_ok());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473x-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            let refused = TraceParent::parse(bad).unwrap_err();
            assert!(refused.contains("W3C"), "{refused}");
        }
    }
}
