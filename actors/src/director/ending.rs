//! How a Director run ends, and what it spent over every run it made.

use super::stop;
use crate::event::{ParkReason, RunOutcome, RunStatus};
use ryvos_protocol::records::{ParkedPlan, RunRecord};
use std::time::Instant;

/// The sums over every run a Director made, across its continues.
pub(super) struct Totals {
    pub turns: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_cents: f64,
    /// How long the Director ran before this stretch (before it parked).
    pub ran_before_ms: u64,
    pub since: Instant,
}

impl Totals {
    pub(super) fn new() -> Self {
        Self {
            turns: 0,
            input_tokens: 0,
            output_tokens: 0,
            cost_cents: 0.0,
            ran_before_ms: 0,
            since: Instant::now(),
        }
    }

    /// Goes on counting from where a parked run stood.
    pub(super) fn take_up(&mut self, parked: &ParkedPlan) {
        self.turns += parked.turns;
        self.input_tokens += parked.input_tokens;
        self.output_tokens += parked.output_tokens;
        self.cost_cents += parked.cost_cents;
        self.ran_before_ms += parked.duration_ms;
    }

    /// How long the Director has run, its parked time left out.
    pub(super) fn duration_ms(&self) -> u64 {
        self.ran_before_ms + self.since.elapsed().as_millis() as u64
    }

    /// Adds a continued step's run, less what it had spent when it parked (counted then).
    pub(super) fn add_continued(&mut self, ran: &RunOutcome, counted: &RunRecord) {
        self.turns += ran.turns.saturating_sub(counted.turns);
        self.input_tokens += ran.input_tokens.saturating_sub(counted.input_tokens);
        self.output_tokens += ran.output_tokens.saturating_sub(counted.output_tokens);
        let before = counted.cost_microcents as f64 / 1_000_000.0;
        self.cost_cents += (ran.cost_cents.unwrap_or(0.0) - before).max(0.0);
    }

    pub(super) fn add(&mut self, ran: &RunOutcome) {
        self.turns += ran.turns;
        self.input_tokens += ran.input_tokens;
        self.output_tokens += ran.output_tokens;
        self.cost_cents += ran.cost_cents.unwrap_or(0.0);
    }
}

/// How a Director run ends.
pub(super) struct End {
    pub status: RunStatus,
    pub output: String,
    pub reason: Option<String>,
    /// Why it parked, when it did (status `parked`).
    pub park: Option<ParkReason>,
}

impl End {
    /// The run parks for `reason`, `message` saying why and what continues it.
    pub(super) fn parked(reason: ParkReason, message: String) -> Self {
        Self {
            status: RunStatus::Parked,
            output: String::new(),
            reason: Some(message),
            park: Some(reason),
        }
    }

    pub(super) fn failed(reason: String) -> Self {
        Self {
            status: RunStatus::Failed,
            output: String::new(),
            reason: Some(reason),
            park: None,
        }
    }

    /// The end of a run stopped from outside, as `stop` asked.
    pub(super) fn stopped(stop: stop::Stop) -> Self {
        Self {
            status: stop.status,
            output: String::new(),
            reason: Some(format!("{}; run the same task again to go on", stop.reason)),
            park: None,
        }
    }
}

/// A step run stopped from outside (a shutdown, a cancel) or never started says nothing about
/// the step: the plan stops as it stands, the step to be run again on resume.
pub(super) fn stopped_from_outside(what: &str, ran: &Result<RunOutcome, String>) -> Option<End> {
    let (status, why) = match ran {
        Ok(r) if matches!(r.status, RunStatus::Cancelled | RunStatus::Interrupted) => (
            r.status,
            format!(
                "{what} was stopped: {}",
                r.reason.clone().unwrap_or_default()
            ),
        ),
        Err(e) => (
            RunStatus::Cancelled,
            format!("{what} could not be run: {e}"),
        ),
        Ok(_) => return None,
    };
    Some(End {
        status,
        output: String::new(),
        reason: Some(format!("{why}; run the same task again to go on")),
        park: None,
    })
}
