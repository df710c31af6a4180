//! The Judge's verdicts.

use crate::goal::CriterionResult;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The Judge's decision about a goal-driven run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Verdict {
    /// The goal is met: the run stops, status `completed`.
    Accept,
    /// Not met yet: the run goes on with a hint naming what is missing.
    Retry,
    /// Cannot be met: the run stops, status `escalated`.
    Escalate,
    /// No decision (in progress, or the judge could not be read): the run goes on.
    Continue,
}

/// A verdict with its grounds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Judgement {
    pub verdict: Verdict,
    pub reason: String,
    /// The weighted share of criteria met, 0–1.
    pub score: f64,
    pub criteria: Vec<CriterionResult>,
}
