//! Level 0: the criteria checked without a model, for free: the final answer's text
//! (`contains`, `equals`, `regex`) and a shell command's exit code in the workspace
//! (`command`, run by the `bash` tool: in the run's sandbox, its own process group, killed at
//! the timeout or when the run stops). A command the model wrote is a tool call in all but
//! name: it passes the security gate first (tier, policy, approval, audit).

use super::{Criterion, CriterionKind, CriterionOrigin, CriterionResult};
use crate::event::RunEvents;
use crate::ids::CallId;
use crate::message::ToolCall;
use crate::security::{Gate, Refused};
use crate::tools::builtin::Bash;
use crate::tools::{Tool, ToolContext};
use std::time::Duration;

/// At most this much of a failing command's output is kept as the reason.
const MAX_REASON_CHARS: usize = 600;

/// Checks a criterion on the answer's text; `None` for the kinds that need more.
pub(crate) fn check_text(criterion: &Criterion, answer: &str) -> Option<CriterionResult> {
    let (met, reason) = match criterion.kind {
        CriterionKind::Contains => {
            let met = answer.contains(&criterion.value);
            (
                met,
                if met {
                    "the answer contains it"
                } else {
                    "the answer does not contain it"
                },
            )
        }
        CriterionKind::Equals => {
            let met = answer.trim() == criterion.value.trim();
            (
                met,
                if met {
                    "the answer is exactly that"
                } else {
                    "the answer is something else"
                },
            )
        }
        CriterionKind::Regex => {
            // Validated when the goal was accepted.
            let met = regex::Regex::new(&criterion.value).is_ok_and(|re| re.is_match(answer));
            (
                met,
                if met {
                    "the answer matches"
                } else {
                    "the answer does not match"
                },
            )
        }
        CriterionKind::Command | CriterionKind::Llm => return None,
    };
    Some(CriterionResult {
        criterion: criterion.to_string(),
        met,
        reason: reason.to_owned(),
    })
}

/// Runs a `command` criterion in the run's workspace: met when it exits 0. A model-written one
/// runs only if the gate admits it; refused, it is unmet with the gate's reason.
pub(crate) async fn check_command(
    criterion: &Criterion,
    ctx: &ToolContext,
    gate: &Gate,
    events: &RunEvents,
    timeout: Duration,
) -> CriterionResult {
    let input = serde_json::json!({
        "command": criterion.value,
        "timeout_secs": timeout.as_secs().max(1),
    });
    if criterion.origin == CriterionOrigin::Model {
        let call = ToolCall {
            id: CallId::new(format!(
                "criterion_{}",
                ulid::Ulid::new().to_string().to_lowercase()
            )),
            name: Bash.name().to_owned(),
            arguments: input.to_string(),
        };
        let no_hooks = crate::hooks::Fired::default();
        let refused = match gate
            .admit(&call, &Bash, &input, ctx, events, no_hooks)
            .await
        {
            Ok(()) => None,
            Err(Refused::Denied(why)) => Some(why),
            Err(Refused::Parked) => {
                Some("the run paused before anyone decided on this command".to_owned())
            }
        };
        if let Some(why) = refused {
            return CriterionResult {
                criterion: criterion.to_string(),
                met: false,
                reason: format!("not run: {}", tail(&why, MAX_REASON_CHARS)),
            };
        }
    }
    let (met, reason) = match Bash.execute(input, ctx).await {
        Ok(_) => (true, "the command exited 0".to_owned()),
        Err(e) => (false, tail(&e.to_string(), MAX_REASON_CHARS)),
    };
    CriterionResult {
        criterion: criterion.to_string(),
        met,
        reason,
    }
}

/// The last `max` characters of `text`: a failing command says why at its end.
fn tail(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.trim().to_owned();
    }
    let kept: String = text.chars().skip(count - max).collect();
    format!("…{}", kept.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(c: &str, answer: &str) -> bool {
        check_text(&c.parse().unwrap(), answer).unwrap().met
    }

    #[test]
    fn text_criteria() {
        assert!(check("contains:42", "The answer is 42."));
        assert!(!check("contains:42", "The answer is 41."));
        assert!(check("equals:done", "  done\n"));
        assert!(!check("equals:done", "done!"));
        assert!(check(r"regex:^\d+ files?$", "3 files"));
        assert!(!check(r"regex:^\d+ files?$", "three files"));
        assert!(check_text(&"command:true".parse().unwrap(), "x").is_none());
    }
}
