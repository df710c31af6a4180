//! From criteria results to a verdict: weighted criteria give a score; the goal is accepted
//! when the score reaches the threshold, retried with a hint naming what is unmet, escalated
//! when the judge model finds it cannot be met, and left to continue when the judge model's
//! verdict could not be read.

use super::rubric::{Decision, JudgeAnswer};
use super::{CriterionResult, Goal, Verdict};
pub(crate) use ryvos_protocol::verdict::Judgement;

/// What the judge model said, when it was asked.
pub(crate) enum ModelOpinion {
    /// Not asked: no criterion needs it, or the free criteria already decide.
    NotAsked,
    Answered(JudgeAnswer),
    /// Its answer was not the asked-for JSON, or the call failed.
    Unreadable(String),
}

/// The verdict on `goal` from the free criteria's `results` and the judge model's `opinion`.
pub(crate) fn decide(
    goal: &Goal,
    mut results: Vec<CriterionResult>,
    opinion: ModelOpinion,
    threshold: f64,
) -> Judgement {
    let answer = match opinion {
        ModelOpinion::Unreadable(why) => {
            return Judgement {
                verdict: Verdict::Continue,
                reason: format!("the judge model gave no verdict ({why}); not accepted"),
                score: score(goal, &results),
                criteria: results,
            }
        }
        ModelOpinion::Answered(answer) => Some(answer),
        ModelOpinion::NotAsked => None,
    };
    if let Some(answer) = &answer {
        results.extend(answer.criteria.iter().cloned());
    }
    let score = if goal.criteria.is_empty() {
        // The goal itself was judged.
        f64::from(u8::from(
            answer.as_ref().map(|a| a.decision) == Some(Decision::Accept),
        ))
    } else {
        score(goal, &results)
    };
    let (verdict, reason) = match &answer {
        Some(a) if a.decision == Decision::Escalate => (Verdict::Escalate, a.reason.clone()),
        _ if score >= threshold => (Verdict::Accept, accepted(&results, answer.as_ref())),
        _ => (Verdict::Retry, unmet(&results, answer.as_ref())),
    };
    Judgement {
        verdict,
        reason,
        score,
        criteria: results,
    }
}

/// Whether the free criteria alone already rule acceptance out, so the judge model need not be
/// paid for.
pub(crate) fn hopeless(goal: &Goal, free: &[CriterionResult], threshold: f64) -> bool {
    let lost = share(goal, free, false);
    goal.criteria.iter().any(|c| c.weight > 0.0) && 1.0 - lost < threshold
}

/// The weighted share of the goal's criteria that `results` says are met.
fn score(goal: &Goal, results: &[CriterionResult]) -> f64 {
    share(goal, results, true)
}

/// The weighted share of the goal's criteria whose result in `results` has `met` as given
/// (0 for a goal without weight).
fn share(goal: &Goal, results: &[CriterionResult], met: bool) -> f64 {
    let total: f64 = goal.criteria.iter().map(|c| c.weight).sum();
    if total <= 0.0 {
        return 0.0;
    }
    let matching: f64 = goal
        .criteria
        .iter()
        .filter(|c| {
            let name = c.to_string();
            results.iter().any(|r| r.met == met && r.criterion == name)
        })
        .map(|c| c.weight)
        .sum();
    matching / total
}

fn accepted(results: &[CriterionResult], answer: Option<&JudgeAnswer>) -> String {
    match answer {
        Some(a) if results.is_empty() => a.reason.clone(),
        _ => format!(
            "{} of {} criteria met",
            results.iter().filter(|r| r.met).count(),
            results.len()
        ),
    }
}

fn unmet(results: &[CriterionResult], answer: Option<&JudgeAnswer>) -> String {
    let missing: Vec<String> = results
        .iter()
        .filter(|r| !r.met)
        .map(|r| format!("'{}' is not met ({})", r.criterion, r.reason))
        .collect();
    match (missing.is_empty(), answer) {
        (true, Some(a)) => a.reason.clone(),
        (true, None) => "the criteria's weighted score is under the threshold".into(),
        (false, _) => missing.join("; "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn goal(criteria: &[&str]) -> Goal {
        Goal {
            description: "g".into(),
            criteria: criteria.iter().map(|c| c.parse().unwrap()).collect(),
            ..Goal::default()
        }
    }

    fn result(c: &str, met: bool) -> CriterionResult {
        CriterionResult {
            criterion: c.into(),
            met,
            reason: "r".into(),
        }
    }

    #[test]
    fn weights_decide_against_the_threshold() {
        let g = goal(&["contains:a@3", "contains:b"]);
        let partly = vec![result("contains:a@3", true), result("contains:b", false)];
        let j = decide(&g, partly.clone(), ModelOpinion::NotAsked, 1.0);
        assert_eq!((j.verdict, j.score), (Verdict::Retry, 0.75));
        assert!(j.reason.contains("'contains:b' is not met"), "{}", j.reason);
        let j = decide(&g, partly, ModelOpinion::NotAsked, 0.7);
        assert_eq!(j.verdict, Verdict::Accept);
    }

    #[test]
    fn an_unreadable_judge_is_never_acceptance() {
        let g = goal(&["contains:a", "llm:is it good"]);
        let j = decide(
            &g,
            vec![result("contains:a", true)],
            ModelOpinion::Unreadable("not JSON".into()),
            0.5,
        );
        assert_eq!(j.verdict, Verdict::Continue);
    }

    #[test]
    fn free_failures_can_make_the_model_call_pointless() {
        let g = goal(&["command:make test@3", "llm:is it tidy"]);
        assert!(hopeless(&g, &[result("command:make test@3", false)], 1.0));
        assert!(!hopeless(&g, &[result("command:make test@3", true)], 1.0));
    }
}
