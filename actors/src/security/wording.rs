//! How the gate's refusals are put to the model.

use crate::tools::SafetyTier;
use std::time::Duration;

pub(super) fn tier_name(tier: SafetyTier) -> &'static str {
    match tier {
        SafetyTier::T0 => "T0 (read-only)",
        SafetyTier::T1 => "T1 (small local effects)",
        SafetyTier::T2 => "T2 (file changes)",
        SafetyTier::T3 => "T3 (running programs)",
        SafetyTier::T4 => "T4 (critical)",
    }
}

pub(super) fn because(reasons: &[String]) -> String {
    if reasons.is_empty() {
        String::new()
    } else {
        format!(" ({})", reasons.join("; "))
    }
}

/// The decision when nobody answered within `timeout`.
pub(super) fn unanswered(timeout: Duration) -> (bool, Option<String>, String) {
    let why = format!(
        "nobody answered the approval request within {}s (approval_timeout_secs)",
        timeout.as_secs()
    );
    (false, Some(why), "unanswered".to_owned())
}

/// What the model is told of a call in doubt that a person (`by`) said must not run again.
pub(super) fn in_doubt_denial(reason: Option<String>, by: &str) -> String {
    let why = reason.unwrap_or_else(|| "no reason given".into());
    format!(
        "denied: a crash cut this call off, so it may or may not have taken effect; {by} \
         decided it must not be run again: {why}. Do not repeat it."
    )
}

/// What the model is told of a call that was not approved, `by` whom and why.
pub(super) fn denial(reason: Option<String>, by: &str) -> String {
    let why = reason.unwrap_or_else(|| "no reason given".into());
    match by {
        "unanswered" | "run_ended" => format!("denied: {why}; the call was not run"),
        _ => format!("denied: the user ({by}) denied this call: {why}"),
    }
}
