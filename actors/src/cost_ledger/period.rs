//! The calendar periods spending is totalled by: the UTC day and the UTC month.

use std::time::{Duration, UNIX_EPOCH};

/// The day and month (UTC) of an instant, as ledger keys use them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Period {
    /// `YYYY-MM-DD`.
    pub day: String,
    /// `YYYY-MM`.
    pub month: String,
}

impl Period {
    /// The period containing `unix_ms`.
    pub fn of(unix_ms: u64) -> Self {
        let stamp = humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(unix_ms))
            .to_string();
        // `YYYY-MM-DDTHH:MM:SSZ`
        Self {
            day: stamp[..10].to_owned(),
            month: stamp[..7].to_owned(),
        }
    }

    /// How long from `unix_ms` until the next month begins (UTC): when a month's limit stops
    /// applying.
    pub fn until_next_month(unix_ms: u64) -> Duration {
        let next = format!("{}T00:00:00Z", Self::of(unix_ms).next_month_start());
        let at = humantime::parse_rfc3339(&next).unwrap_or(UNIX_EPOCH);
        (at.duration_since(UNIX_EPOCH).unwrap_or_default())
            .saturating_sub(Duration::from_millis(unix_ms))
    }

    /// The first day of the next month, `YYYY-MM-01`: when a month's limit stops applying.
    pub fn next_month_start(&self) -> String {
        let year: u32 = self.month[..4].parse().unwrap_or(1970);
        let month: u32 = self.month[5..7].parse().unwrap_or(1);
        if month >= 12 {
            format!("{:04}-01-01", year + 1)
        } else {
            format!("{year:04}-{:02}-01", month + 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_months_and_the_turn_of_the_year() {
        // 2026-11-22T06:50:00Z
        let p = Period::of(1_795_330_200_000);
        assert_eq!(p.day, "2026-11-22");
        assert_eq!(p.month, "2026-11");
        assert_eq!(p.next_month_start(), "2026-12-01");
        // 2026-12-31T23:59:59Z
        let p = Period::of(1_798_761_599_000);
        assert_eq!(p.month, "2026-12");
        assert_eq!(p.next_month_start(), "2027-01-01");
        // One second before the year turns.
        assert_eq!(
            Period::until_next_month(1_798_761_599_000),
            Duration::from_secs(1)
        );
    }
}
