//! A message to the agent: a new task (a run in the workspace, in the message's context or a
//! new one), or the answer to a task that waits for input: `approve`, `deny: reason` or
//! `continue 500` (a budget in cents), as its text or as a data part with the same fields
//! (`{"decision": "deny", "reason": "…"}`, `{"decision": "continue", "budget_cents": 500}`).

use super::found::{record, waiting};
use super::refusal::{internal, Refusal};
use super::tasks::begun;
use crate::daemon::approvals;
use crate::daemon::console::State;
use a2a::{error_code, Message, PartContent, Task};
use ryvos::protocol::AnswerParams;
use ryvos::{RunHandle, RunRequest, RunStatus, SessionId};
use serde_json::Value;

/// What a message set going: the run to follow, and its task as it stands.
pub(super) struct Going {
    pub run: RunHandle,
    pub task: Task,
}

/// Starts what `message` asks for, answering as `by` when it answers a task.
pub(super) async fn going(state: &State, message: Message, by: &str) -> Result<Going, Refusal> {
    let text = text_of(&message);
    match message.task_id.as_deref() {
        Some(task) => answer(state, task, &message, by).await,
        None if text.trim().is_empty() => Err((
            error_code::INVALID_PARAMS,
            "the message has no text: say what to do".into(),
        )),
        None => begin(state, text, message.context_id.as_deref()).await,
    }
}

/// The message's text: its text parts, and its data parts as JSON.
fn text_of(message: &Message) -> String {
    let parts: Vec<String> = (message.parts.iter())
        .filter_map(|part| match &part.content {
            PartContent::Text(text) => Some(text.clone()),
            PartContent::Data(data) => Some(data.to_string()),
            _ => None,
        })
        .collect();
    parts.join("\n\n")
}

/// A new task: a run of `text` in the workspace, in `context` (a session) or a new one.
async fn begin(state: &State, text: String, context: Option<&str>) -> Result<Going, Refusal> {
    let workspace = (state.shared.a2a.clone())
        .ok_or_else(|| internal("this agent serves no A2A door".into()))?;
    let session = match context {
        Some(context) if context.starts_with("s_") => SessionId::new(context),
        Some(context) => {
            return Err((
                error_code::INVALID_PARAMS,
                format!("context {context} is not one of this agent's: leave it out to begin one"),
            ))
        }
        None => SessionId::generate(),
    };
    let request = RunRequest::new(text.clone())
        .workspace(workspace)
        .session(session.clone());
    let run = (state.shared.runtime.run(request).await).map_err(|e| internal(e.to_string()))?;
    // Its record may not be stored yet: until it is, the task is told as begun.
    let task = begun(&run.run_id, &session, &text);
    state.begun.keep(&task);
    Ok(Going { run, task })
}

/// What a message on a task that waits for input decides.
enum Decision {
    Approve,
    Deny(Option<String>),
    Continue(Option<u64>),
}

/// Answers task `task`, which waits for input, as `message` decides.
async fn answer(state: &State, task: &str, message: &Message, by: &str) -> Result<Going, Refusal> {
    let run = record(state, task).await?;
    let waiting = waiting(state, &run.run_id).await;
    let decision = decision_of(message)?;
    let runtime = &state.shared.runtime;
    let fail = |e: String| internal(e);
    let going = |run: RunHandle, task: Task| Ok(Going { run, task });
    match (&decision, run.status) {
        (Decision::Approve | Decision::Deny(_), None) if !waiting.is_empty() => {
            // Followed from before the answer, so nothing it does next is missed.
            let following = runtime.follow(&run.session_id, &run.run_id);
            let (approved, reason) = match &decision {
                Decision::Deny(reason) => (false, reason.clone()),
                _ => (true, None),
            };
            // As every door answers: through the daemon whose run waits, if it is another.
            for asked in waiting {
                let params = AnswerParams {
                    request_id: asked.request_id,
                    reason: reason.clone(),
                    always: false,
                    by: Some(by.to_owned()),
                };
                (approvals::answer(params, approved, &state.shared).await)
                    .map_err(|e| fail(e.message))?;
            }
            going(following, super::tasks::task_of(&run, false))
        }
        (Decision::Continue(budget), Some(RunStatus::Parked)) => {
            let continued = (runtime.continue_run(&run.run_id, *budget))
                .await
                .map_err(|e| fail(e.to_string()))?;
            going(continued, super::tasks::task_of(&run, false))
        }
        _ => Err((
            error_code::INVALID_PARAMS,
            format!(
                "task {task} does not wait for that: {}",
                match run.status {
                    None if !waiting.is_empty() =>
                        "a call waits for approval: answer `approve` or `deny: reason`",
                    Some(RunStatus::Parked) =>
                        "its run parked: answer `continue` or `continue 500` (a budget in cents)",
                    _ => "it waits for no input",
                }
            ),
        )),
    }
}

/// The decision a message carries: its data part's `decision`, else its text.
fn decision_of(message: &Message) -> Result<Decision, Refusal> {
    let data = (message.parts.iter()).find_map(|part| match &part.content {
        PartContent::Data(Value::Object(data)) => Some(data),
        _ => None,
    });
    let (word, detail) = match data {
        Some(data) => {
            let word = data
                .get("decision")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let detail = match word {
                "continue" => data.get("budget_cents").map(Value::to_string),
                _ => data
                    .get("reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            };
            (word.to_owned(), detail)
        }
        None => {
            let text = text_of(message);
            let text = text.trim();
            let (word, detail) = match text.split_once([':', ' ']) {
                Some((word, detail)) => (word, Some(detail.trim().to_owned())),
                None => (text, None),
            };
            (word.to_lowercase(), detail.filter(|d| !d.is_empty()))
        }
    };
    match word.as_str() {
        "approve" => Ok(Decision::Approve),
        "deny" => Ok(Decision::Deny(detail)),
        "continue" => match detail.map(|d| d.parse::<u64>()) {
            None => Ok(Decision::Continue(None)),
            Some(Ok(cents)) => Ok(Decision::Continue(Some(cents))),
            Some(Err(_)) => Err((
                error_code::INVALID_PARAMS,
                "`continue` takes a budget in whole cents, e.g. `continue 500`".into(),
            )),
        },
        _ => Err((
            error_code::INVALID_PARAMS,
            "answer a task that waits with `approve`, `deny: reason` or `continue 500` (or a \
             data part {\"decision\": …})"
                .into(),
        )),
    }
}
