//! Where a Director run stands, stored after every change: the plan, each step's state and
//! result. A run cut off by a crash resumes from it, and a step that finished is never run
//! again.

use crate::event::ParkReason;
use crate::goal::Goal;
use crate::ids::{RunId, SessionId};
use crate::plan::Plan;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A Director run's plan and progress (table `plans`, one per session).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlanRecord {
    pub session_id: SessionId,
    /// Names this plan's step sessions, so a later plan on the session never continues an
    /// earlier plan's step conversations.
    pub key: String,
    /// The Director run that made the plan (a resumed run has a new id).
    pub run_id: RunId,
    pub prompt: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<Goal>,
    pub plan: Plan,
    /// How many times the plan was revised after a step failed.
    pub revision: u32,
    pub steps: BTreeMap<String, StepProgress>,
    /// Every step is done and the final answer was asked for: nothing is left to resume.
    pub finished: bool,
    /// The Director run parked (a step's run reached a budget): it goes on with `continue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parked: Option<ParkedPlan>,
}

/// One step's state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepProgress {
    pub state: StepState,
    /// Runs made for it so far.
    pub attempts: u32,
    /// Its final answer, once done; why it failed, once failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
}

/// Where a step is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepState {
    #[default]
    Pending,
    /// A run of it is in flight (or was, when the process stopped).
    Running,
    Done,
    Failed,
    /// Its run (`run_id`) parked at a budget; a continue of the Director run goes on with it.
    Parked,
}

/// Where a parked Director run stands: why it parked and what it had spent, over every run it
/// made, so that its continue goes on counting.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ParkedPlan {
    pub reason: Option<ParkReason>,
    pub message: String,
    pub turns: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_cents: f64,
    pub duration_ms: u64,
    /// What the Director run asked for over the configuration, for its continue.
    #[serde(default)]
    pub settings: crate::records::RunSettings,
}

impl PlanRecord {
    /// A new record for `plan`, every step pending.
    pub fn new(
        session_id: SessionId,
        run_id: RunId,
        prompt: String,
        goal: Option<Goal>,
        plan: Plan,
    ) -> Self {
        let steps = plan
            .steps
            .iter()
            .map(|s| (s.id.clone(), StepProgress::default()))
            .collect();
        // The run id's last characters: random, short, stable for the plan's life.
        let id = run_id.as_str();
        let key = id[id.len().saturating_sub(6)..].to_owned();
        Self {
            session_id,
            key,
            run_id,
            prompt,
            goal,
            plan,
            revision: 0,
            steps,
            finished: false,
            parked: None,
        }
    }

    /// Takes a revised plan: steps already done keep their results and are not run again,
    /// steps in flight go on; the others start over.
    pub fn revise(&mut self, plan: Plan) {
        let mut steps = BTreeMap::new();
        for step in &plan.steps {
            let progress = match self.steps.get(&step.id) {
                Some(p) if matches!(p.state, StepState::Done | StepState::Running) => p.clone(),
                _ => StepProgress::default(),
            };
            steps.insert(step.id.clone(), progress);
        }
        // Results of done steps the new plan leaves out stay available to it.
        for (id, p) in &self.steps {
            if p.state == StepState::Done && !steps.contains_key(id) {
                steps.insert(id.clone(), p.clone());
            }
        }
        self.plan = plan;
        self.steps = steps;
        self.revision += 1;
    }

    /// Steps that may start now: pending, with every dependency done.
    pub fn ready(&self) -> Vec<String> {
        self.plan
            .steps
            .iter()
            .filter(|s| self.state(&s.id) == StepState::Pending)
            .filter(|s| {
                s.depends_on
                    .iter()
                    .all(|d| self.state(d) == StepState::Done)
            })
            .map(|s| s.id.clone())
            .collect()
    }

    /// Whether every step of the plan is done.
    pub fn all_done(&self) -> bool {
        self.plan
            .steps
            .iter()
            .all(|s| self.state(&s.id) == StepState::Done)
    }

    /// The state of step `id`.
    pub fn state(&self, id: &str) -> StepState {
        self.steps.get(id).map_or(StepState::Pending, |p| p.state)
    }

    /// A resumed record: steps that were in flight when the process stopped, or that had
    /// failed (their revision never came), start over.
    pub fn resumed(mut self, run_id: RunId) -> Self {
        self.run_id = run_id;
        for p in self.steps.values_mut() {
            if matches!(p.state, StepState::Running | StepState::Failed) {
                p.state = StepState::Pending;
                p.attempts = 0;
            }
        }
        self
    }

    /// The session step `step` runs in.
    pub fn step_session(&self, step: &str) -> SessionId {
        let suffix = format!("-{}-{step}", self.key);
        let parent = self.session_id.as_str();
        let mut cut = parent.len().min(128usize.saturating_sub(suffix.len()));
        while !parent.is_char_boundary(cut) {
            cut -= 1;
        }
        SessionId::new(format!("{}{suffix}", &parent[..cut]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_become_ready_as_their_dependencies_finish_and_revisions_keep_done_work() {
        let plan = Plan::parse(
            r#"{"steps": [{"id": "a", "goal": "x"}, {"id": "b", "goal": "y"},
                {"id": "c", "goal": "z", "depends_on": ["a", "b"]}]}"#,
            10,
        )
        .unwrap();
        let mut r = PlanRecord::new(SessionId::new("s"), RunId::new("r"), "p".into(), None, plan);
        assert_eq!(r.ready(), ["a", "b"]);
        r.steps.get_mut("a").unwrap().state = StepState::Done;
        r.steps.get_mut("b").unwrap().state = StepState::Running;
        assert!(r.ready().is_empty());
        let r = r.resumed(RunId::new("r2"));
        assert_eq!(r.ready(), ["b"]);
        let mut r = r;
        let revised = Plan::parse(
            r#"{"steps": [{"id": "a", "goal": "x"}, {"id": "b2", "goal": "y again"},
                {"id": "c", "goal": "z", "depends_on": ["a", "b2"]}]}"#,
            10,
        )
        .unwrap();
        r.revise(revised);
        assert_eq!(r.state("a"), StepState::Done);
        assert_eq!(r.ready(), ["b2"]);
        assert_eq!(r.revision, 1);
    }
}
