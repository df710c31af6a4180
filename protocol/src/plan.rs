//! A Director's plan: a graph of steps, each with its own goal and criteria, and the steps it
//! depends on. A plan from the model is read strictly and validated — ids well formed and
//! unique, dependencies known, no cycle, a bounded size — so that executing it always ends.

use crate::goal::Criterion;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The longest step id.
const MAX_ID_LEN: usize = 32;

/// A validated plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Plan {
    pub steps: Vec<Step>,
}

/// One step of a plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Step {
    /// Short, unique within the plan: letters, digits, `_` and `-`.
    pub id: String,
    /// What the step must achieve; the prompt of its run.
    pub goal: String,
    /// How its answer is judged (`KIND:VALUE[@WEIGHT]`); none: its answer is taken as is.
    #[serde(default)]
    pub criteria: Vec<Criterion>,
    /// Steps whose results it needs; it starts once they are done.
    #[serde(default)]
    pub depends_on: Vec<String>,
}

/// Why a plan was refused; said to the model when it is asked again.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("the plan is not the JSON asked for ({0})")]
    NotJson(String),
    #[error("the plan has no steps")]
    Empty,
    #[error("the plan has {0} steps; at most {1} are allowed")]
    TooLarge(usize, usize),
    #[error("step id '{0}' is not usable: use 1 to {MAX_ID_LEN} letters, digits, '_' or '-'")]
    BadId(String),
    #[error("step id '{0}' is used twice")]
    Duplicate(String),
    #[error("step '{0}' has an empty goal")]
    EmptyGoal(String),
    #[error("step '{0}' depends on '{1}', which is not a step of the plan")]
    UnknownDependency(String, String),
    #[error("the steps {0} depend on each other in a cycle; a plan must be acyclic")]
    Cycle(String),
    #[error("step '{0}': {1}")]
    Criterion(String, String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WirePlan {
    steps: Vec<WireStep>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireStep {
    id: String,
    goal: String,
    #[serde(default)]
    criteria: Vec<String>,
    #[serde(default)]
    depends_on: Vec<String>,
}

impl Plan {
    /// Reads and validates a plan: one JSON object, criteria as `KIND:VALUE[@WEIGHT]` text.
    pub fn parse(json: &str, max_steps: usize) -> Result<Plan, PlanError> {
        let wire: WirePlan =
            serde_json::from_str(json).map_err(|e| PlanError::NotJson(e.to_string()))?;
        let mut steps = Vec::with_capacity(wire.steps.len());
        for s in wire.steps {
            let criteria = s
                .criteria
                .iter()
                .map(|c| c.parse::<Criterion>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| PlanError::Criterion(s.id.clone(), e.to_string()))?;
            steps.push(Step {
                id: s.id,
                goal: s.goal,
                criteria,
                depends_on: s.depends_on,
            });
        }
        let plan = Plan { steps };
        plan.validate(max_steps)?;
        Ok(plan)
    }

    /// Checks what execution relies on: ids, dependencies, no cycle, the size.
    pub fn validate(&self, max_steps: usize) -> Result<(), PlanError> {
        if self.steps.is_empty() {
            return Err(PlanError::Empty);
        }
        if self.steps.len() > max_steps {
            return Err(PlanError::TooLarge(self.steps.len(), max_steps));
        }
        let mut ids = BTreeSet::new();
        for s in &self.steps {
            let well_formed = !s.id.is_empty()
                && s.id.len() <= MAX_ID_LEN
                && s.id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !well_formed {
                return Err(PlanError::BadId(s.id.clone()));
            }
            if !ids.insert(s.id.as_str()) {
                return Err(PlanError::Duplicate(s.id.clone()));
            }
            if s.goal.trim().is_empty() {
                return Err(PlanError::EmptyGoal(s.id.clone()));
            }
        }
        for s in &self.steps {
            if let Some(d) = s.depends_on.iter().find(|d| !ids.contains(d.as_str())) {
                return Err(PlanError::UnknownDependency(s.id.clone(), d.clone()));
            }
        }
        self.order().map(|_| ())
    }

    /// The steps in an order where each comes after what it depends on (Kahn's algorithm); a
    /// cycle is an error naming the steps caught in it.
    pub fn order(&self) -> Result<Vec<&Step>, PlanError> {
        let mut waiting: BTreeMap<&str, usize> = self
            .steps
            .iter()
            .map(|s| (s.id.as_str(), s.depends_on.len()))
            .collect();
        let mut order = Vec::with_capacity(self.steps.len());
        let mut ready: Vec<&Step> = self
            .steps
            .iter()
            .filter(|s| s.depends_on.is_empty())
            .collect();
        while let Some(step) = ready.pop() {
            order.push(step);
            for next in &self.steps {
                if next.depends_on.contains(&step.id) {
                    let left = waiting.entry(next.id.as_str()).or_default();
                    *left = left
                        .saturating_sub(next.depends_on.iter().filter(|d| **d == step.id).count());
                    if *left == 0 {
                        ready.push(next);
                    }
                }
            }
        }
        if order.len() < self.steps.len() {
            let stuck: Vec<String> = self
                .steps
                .iter()
                .filter(|s| !order.iter().any(|o| o.id == s.id))
                .map(|s| format!("'{}'", s.id))
                .collect();
            return Err(PlanError::Cycle(stuck.join(", ")));
        }
        Ok(order)
    }

    /// The step `id`.
    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.id == id)
    }
}

/// What happened to a step, as `DirectorStep` events say.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepEvent {
    Started,
    Completed,
    Failed,
    Retrying,
    /// Its run parked at a budget: the Director run parks once its other steps end, and a
    /// continue goes on with that run.
    Parked,
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOUR: &str = r#"{"steps": [
        {"id": "a", "goal": "write a.txt", "criteria": ["command:test -f a.txt"]},
        {"id": "b", "goal": "write b.txt"},
        {"id": "c", "goal": "join them", "depends_on": ["a", "b"]},
        {"id": "d", "goal": "report", "depends_on": ["c"]}
    ]}"#;

    #[test]
    fn a_diamond_plan_is_read_and_ordered() {
        let plan = Plan::parse(FOUR, 12).unwrap();
        let order: Vec<&str> = plan
            .order()
            .unwrap()
            .iter()
            .map(|s| s.id.as_str())
            .collect();
        let at = |id: &str| order.iter().position(|o| *o == id).unwrap();
        assert!(at("c") > at("a") && at("c") > at("b") && at("d") > at("c"));
        assert_eq!(plan.steps[0].criteria.len(), 1);
    }

    #[test]
    fn bad_plans_are_refused_saying_why() {
        let cyclic = r#"{"steps": [{"id": "a", "goal": "x", "depends_on": ["b"]}, {"id": "b", "goal": "y", "depends_on": ["a"]}]}"#;
        assert!(
            matches!(Plan::parse(cyclic, 12), Err(PlanError::Cycle(s)) if s.contains("'a'") && s.contains("'b'"))
        );
        let unknown = r#"{"steps": [{"id": "a", "goal": "x", "depends_on": ["z"]}]}"#;
        assert!(matches!(
            Plan::parse(unknown, 12),
            Err(PlanError::UnknownDependency(..))
        ));
        let twice = r#"{"steps": [{"id": "a", "goal": "x"}, {"id": "a", "goal": "y"}]}"#;
        assert!(matches!(
            Plan::parse(twice, 12),
            Err(PlanError::Duplicate(_))
        ));
        assert!(matches!(
            Plan::parse(FOUR, 3),
            Err(PlanError::TooLarge(4, 3))
        ));
        assert!(matches!(
            Plan::parse(r#"{"steps": []}"#, 3),
            Err(PlanError::Empty)
        ));
        assert!(matches!(
            Plan::parse("Here is my plan: do it", 3),
            Err(PlanError::NotJson(_))
        ));
        let bad_id = r#"{"steps": [{"id": "a b", "goal": "x"}]}"#;
        assert!(matches!(Plan::parse(bad_id, 3), Err(PlanError::BadId(_))));
        let bad_criterion = r#"{"steps": [{"id": "a", "goal": "x", "criteria": ["nope"]}]}"#;
        assert!(matches!(
            Plan::parse(bad_criterion, 3),
            Err(PlanError::Criterion(..))
        ));
    }
}
