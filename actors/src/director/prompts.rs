//! What the Director asks: a plan, a corrected or revised plan, a step's work, and the final
//! answer. Each is a run's prompt; the plan itself is read by [`Plan::parse`].

use super::{Plan, PlanError, Step};
use super::{PlanRecord, StepState};
use crate::judge::Goal;
use crate::text::truncate;

/// The longest result of a dependency put into a step's prompt, in bytes.
const RESULT_BYTES: usize = 2000;

const PLAN_SHAPE: &str = "Answer with one JSON object and nothing else: {\"steps\": [{\"id\": \
\"short-id\", \"goal\": \"what this step must achieve\", \"criteria\": [\"KIND:VALUE\"], \
\"depends_on\": [\"id\"]}]}. KIND is contains, equals or regex (checked on the step's answer), \
command (a shell command that must exit 0 in the workspace) or llm (a question a judge model \
answers); criteria may be empty. A command criterion passes the security gate like a bash \
call (it may need a person's approval, or be denied) and runs in the sandbox: prefer contains, \
equals or regex where they suffice. Ids use letters, digits, '_' and '-'. The steps must not \
depend on each other in a cycle.";

/// Asks for the plan of `task`.
pub(super) fn plan(task: &str, goal: Option<&Goal>, max_steps: usize) -> String {
    let goal = goal
        .map(|g| format!("\n{}", crate::judge::goal::focus(g, None)))
        .unwrap_or_default();
    format!(
        "[Director] Plan how to carry out the task below as a graph of at most {max_steps} \
         steps. Each step is carried out by its own agent, with the same tools and workspace, \
         that sees only the step's goal and the results of the steps it depends on. Steps that \
         do not depend on each other run at the same time.\n\nTask: {task}\n{goal}\n{PLAN_SHAPE}"
    )
}

/// Asks again after a refused plan.
pub(super) fn refused(error: &PlanError) -> String {
    format!("[Director] That plan was refused: {error}. Answer again with a corrected plan. {PLAN_SHAPE}")
}

/// Asks for a revised plan after a step failed.
pub(super) fn revise(record: &PlanRecord, why: &str, max_steps: usize) -> String {
    let done: Vec<String> = record
        .steps
        .iter()
        .filter(|(_, p)| p.state == StepState::Done)
        .map(|(id, _)| format!("'{id}'"))
        .collect();
    let done = if done.is_empty() {
        "No step is done yet.".to_owned()
    } else {
        format!(
            "Done (keep their ids; they will not run again): {}.",
            done.join(", ")
        )
    };
    format!(
        "[Director] The plan must change: {why}. {done} Answer with the whole revised plan of \
         at most {max_steps} steps for the task: {}. {PLAN_SHAPE}",
        record.prompt
    )
}

/// A step's prompt: its goal, and the results of the steps it depends on.
pub(super) fn step(record: &PlanRecord, step: &Step) -> String {
    let mut prompt = format!(
        "[Director] You carry out step '{}' of a plan for this task: {}\n\nYour step: {}\n",
        step.id, record.prompt, step.goal
    );
    if let Some(p) = record.steps.get(&step.id).filter(|p| p.attempts > 1) {
        prompt.push_str(&format!(
            "\nAn earlier attempt at this step failed ({}); do it again.\n",
            clip(&p.output)
        ));
    }
    if !step.depends_on.is_empty() {
        prompt.push_str("\nResults of the steps it depends on:\n");
        for dep in &step.depends_on {
            let result = record.steps.get(dep).map_or("", |p| p.output.as_str());
            prompt.push_str(&format!("- {dep}: {}\n", clip(result)));
        }
    }
    prompt.push_str("\nDo the step, then give its result as your final answer.");
    prompt
}

/// Asks for the final answer once every step is done.
pub(super) fn final_answer(record: &PlanRecord) -> String {
    let mut prompt = String::from("[Director] Every step of the plan is done. Their results:\n");
    for s in ordered(&record.plan) {
        let result = record.steps.get(&s.id).map_or("", |p| p.output.as_str());
        prompt.push_str(&format!("- {}: {}\n", s.id, clip(result)));
    }
    prompt.push_str(&format!(
        "\nNow give the final answer to the task: {}",
        record.prompt
    ));
    prompt
}

fn ordered(plan: &Plan) -> Vec<&Step> {
    plan.order().unwrap_or_else(|_| plan.steps.iter().collect())
}

fn clip(text: &str) -> String {
    truncate(text, RESULT_BYTES)
}
