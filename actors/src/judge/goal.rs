//! How a goal reads in the system prompt's focus layer. Goals themselves are plain data, in
//! [`ryvos_protocol::goal`].

use ryvos_protocol::goal::{CriterionKind, Goal};

/// The focus layer of the system prompt: the goal, its criteria and constraints, and where
/// the evaluation stands (`status`, once the Judge has spoken).
pub(crate) fn focus(goal: &Goal, status: Option<&str>) -> String {
    let mut out = format!("## Goal\n{}\n", goal.description.trim());
    if !goal.criteria.is_empty() {
        out.push_str(
            "\nSuccess criteria (checked by the Judge when you give your final answer):\n",
        );
        for c in &goal.criteria {
            let what = match c.kind {
                CriterionKind::Contains => format!("the final answer contains {:?}", c.value),
                CriterionKind::Equals => format!("the final answer is exactly {:?}", c.value),
                CriterionKind::Regex => format!("the final answer matches /{}/", c.value),
                CriterionKind::Command => format!("`{}` succeeds in the workspace", c.value),
                CriterionKind::Llm => c.value.clone(),
            };
            out.push_str(&format!("- {what} (weight {})\n", c.weight));
        }
    }
    let c = &goal.constraints;
    let mut limits = Vec::new();
    if let Some(secs) = c.time_secs {
        limits.push(format!("time: {secs} s"));
    }
    if let Some(cents) = c.cost_cents {
        limits.push(format!("cost: {cents} cents"));
    }
    for (name, value) in [
        ("scope", &c.scope),
        ("safety", &c.safety),
        ("quality", &c.quality),
    ] {
        if let Some(v) = value {
            limits.push(format!("{name}: {v}"));
        }
    }
    if !limits.is_empty() {
        out.push_str("\nConstraints:\n");
        for l in limits {
            out.push_str(&format!("- {l}\n"));
        }
    }
    if let Some(status) = status {
        out.push_str(&format!("\nEvaluation so far: {status}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ryvos_protocol::goal::Constraints;

    #[test]
    fn the_focus_layer_names_criteria_constraints_and_status() {
        let goal = Goal {
            description: "Compute the answer".into(),
            criteria: vec![
                "contains:42".parse().unwrap(),
                "command:make test@2".parse().unwrap(),
            ],
            constraints: Constraints {
                time_secs: Some(60),
                ..Constraints::default()
            },
        };
        let focus = focus(&goal, Some("retry 1 of 3: 'contains:42' is unmet"));
        assert!(focus.starts_with("## Goal\nCompute the answer"));
        assert!(focus.contains("contains \"42\" (weight 1)"));
        assert!(focus.contains("`make test` succeeds in the workspace (weight 2)"));
        assert!(focus.contains("time: 60 s"));
        assert!(focus.contains("Evaluation so far: retry 1 of 3"));
    }
}
