//! The Judge's verdicts on a run, as stored.

use crate::ids::RunId;
use crate::verdict::Judgement;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One verdict of the Judge on a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VerdictRecord {
    pub run_id: RunId,
    /// Its place among the run's verdicts, from 1.
    pub n: u32,
    /// The turn it judged.
    pub turn: u32,
    pub at_ms: u64,
    #[serde(flatten)]
    pub judgement: Judgement,
}
