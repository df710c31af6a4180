//! How long a server asked to be left alone: `Retry-After` (seconds or an HTTP date),
//! OpenAI's `retry-after-ms` and `x-ratelimit-reset-*` (Go-style durations such as `6m0s`),
//! and Anthropic's `anthropic-ratelimit-*-reset` (RFC 3339 times).

use reqwest::header::HeaderMap;
use std::time::{Duration, SystemTime};

/// The wait the headers ask for, if any. Explicit retry headers win; otherwise the latest
/// reset among the limits whose remaining count is zero.
pub(crate) fn from_headers(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        // A value no clock can wait (negative, NaN, infinite) is no hint.
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    if let Some(value) = text("retry-after") {
        return retry_after(value, SystemTime::now());
    }
    let mut wait: Option<Duration> = None;
    for (name, value) in headers {
        let (Some(value), name) = (value.to_str().ok().map(str::trim), name.as_str()) else {
            continue;
        };
        let (remaining, reset) = if let Some(kind) = name.strip_prefix("x-ratelimit-reset-") {
            (
                text(&format!("x-ratelimit-remaining-{kind}")),
                humantime::parse_duration(value).ok(),
            )
        } else if let Some(limit) = name
            .strip_prefix("anthropic-ratelimit-")
            .and_then(|n| n.strip_suffix("-reset"))
        {
            (
                text(&format!("anthropic-ratelimit-{limit}-remaining")),
                humantime::parse_rfc3339_weak(value)
                    .ok()
                    .map(|at| at.duration_since(SystemTime::now()).unwrap_or_default()),
            )
        } else {
            continue;
        };
        if remaining == Some("0") {
            wait = wait.max(reset);
        }
    }
    wait
}

/// A `Retry-After` value: delay-seconds or an HTTP date (a date in the past means now).
pub(crate) fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderName, HeaderValue};

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(n, v)| {
                (
                    HeaderName::from_bytes(n.as_bytes()).unwrap(),
                    HeaderValue::from_str(v).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn retry_after_takes_seconds_or_an_http_date() {
        assert_eq!(
            from_headers(&headers(&[("retry-after", "3")])),
            Some(Duration::from_secs(3))
        );
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        assert_eq!(
            retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after("soon", now), None);
    }

    #[test]
    fn openai_reset_headers_count_only_for_an_exhausted_limit() {
        let h = headers(&[
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "1.5s"),
            ("x-ratelimit-remaining-tokens", "9000"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ]);
        assert_eq!(from_headers(&h), Some(Duration::from_millis(1500)));
        let h = headers(&[("retry-after-ms", "250")]);
        assert_eq!(from_headers(&h), Some(Duration::from_millis(250)));
        for nonsense in ["inf", "1e300", "-5", "NaN"] {
            assert_eq!(
                from_headers(&headers(&[("retry-after-ms", nonsense)])),
                None
            );
        }
    }

    #[test]
    fn anthropic_reset_times_are_read() {
        let at = humantime::format_rfc3339_seconds(SystemTime::now() + Duration::from_secs(30));
        let h = headers(&[
            ("anthropic-ratelimit-tokens-remaining", "0"),
            ("anthropic-ratelimit-tokens-reset", &at.to_string()),
        ]);
        let wait = from_headers(&h).unwrap();
        assert!(
            wait > Duration::from_secs(25) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
    }
}
