//! A task as it goes, as server-sent events (`SendStreamingMessage`, `SubscribeToTask`): the
//! task first, then its status as the run works (each tool it runs), its answer as an
//! artifact, and its end. The stream closes at the end, or when the task waits for input.

use super::tasks::state_of;
use a2a::{
    error_code, Artifact, JsonRpcError, JsonRpcId, JsonRpcResponse, Message, Part, Role,
    StreamResponse, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent,
};
use axum::response::sse::{Event as Sent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use ryvos::{EventKind, RunHandle, RunStatus, RunUpdate};
use std::convert::Infallible;

/// The task's id and context, as every update names them.
#[derive(Clone)]
pub(super) struct Named {
    pub task: String,
    pub context: String,
}

/// Request `id`'s answer: `task`, then `run`'s updates until its end or a wait for input.
pub(super) fn streamed(id: JsonRpcId, task: Task, run: RunHandle, ended: bool) -> Response {
    let named = Named {
        task: task.id.clone(),
        context: task.context_id.clone(),
    };
    let first =
        futures_util::stream::once(std::future::ready(sent(&id, StreamResponse::Task(task))));
    let rest = futures_util::stream::unfold((!ended).then_some(run), move |run| {
        let (id, named) = (id.clone(), named.clone());
        async move {
            let mut run = run?;
            loop {
                let RunUpdate::Event(event) = run.next().await? else {
                    continue;
                };
                if let Some((updates, ends)) = told(&event.kind, &named) {
                    let sent: Vec<_> = updates.into_iter().map(|u| sent(&id, u)).collect();
                    return Some((futures_util::stream::iter(sent), (!ends).then_some(run)));
                }
            }
        }
    })
    .flatten();
    Sse::new(first.chain(rest))
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// `update` as an SSE event: a JSON-RPC response to request `id`.
/// One that cannot be encoded is sent as this agent's error in its place.
fn sent(id: &JsonRpcId, update: StreamResponse) -> Result<Sent, Infallible> {
    let response = match serde_json::to_value(&update) {
        Ok(result) => JsonRpcResponse::success(id.clone(), result),
        Err(e) => JsonRpcResponse::error(
            id.clone(),
            JsonRpcError {
                code: error_code::INTERNAL_ERROR,
                message: format!("encoding an update: {e}"),
                data: None,
            },
        ),
    };
    // The response is plain JSON values and strings: it always encodes.
    Ok(Sent::default()
        .json_data(&response)
        .unwrap_or_else(|e| Sent::default().event("error").data(e.to_string())))
}

/// The updates a run's `event` makes, and whether the stream ends with them: what a stream
/// sends, and what is pushed to the task's push targets.
pub(super) fn told(event: &EventKind, named: &Named) -> Option<(Vec<StreamResponse>, bool)> {
    match event {
        EventKind::RunStarted { .. } => {
            Some((vec![status(named, TaskState::Working, None)], false))
        }
        EventKind::ToolStart { name, .. } => {
            let doing = format!("running {name}");
            Some((vec![status(named, TaskState::Working, Some(doing))], false))
        }
        EventKind::ApprovalRequested { tool, input, .. } => {
            let asked = format!(
                "{tool} waits for approval ({input}): answer on this task `approve` or `deny: \
                 reason`"
            );
            Some((
                vec![status(named, TaskState::InputRequired, Some(asked))],
                true,
            ))
        }
        EventKind::RunComplete {
            status: ended,
            output,
            reason,
            ..
        } => {
            let (state, why) = state_of(*ended, reason.as_deref());
            let why = match ended {
                RunStatus::Parked => why.map(|why| {
                    format!("{why}; answer on this task `continue 500` (a budget in cents)")
                }),
                _ => why,
            };
            let mut updates = Vec::new();
            if *ended == RunStatus::Completed {
                updates.push(answer(named, output));
            }
            updates.push(status(named, state, why));
            Some((updates, true))
        }
        _ => None,
    }
}

fn status(named: &Named, state: TaskState, said: Option<String>) -> StreamResponse {
    let message = said.map(|text| Message {
        context_id: Some(named.context.clone()),
        task_id: Some(named.task.clone()),
        ..Message::new(Role::Agent, vec![Part::text(text)])
    });
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: named.task.clone(),
        context_id: named.context.clone(),
        status: TaskStatus {
            state,
            message,
            timestamp: Some(chrono::Utc::now()),
        },
        metadata: None,
    })
}

fn answer(named: &Named, output: &str) -> StreamResponse {
    StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
        task_id: named.task.clone(),
        context_id: named.context.clone(),
        artifact: Artifact {
            artifact_id: "answer".into(),
            name: Some("answer".into()),
            description: None,
            parts: vec![Part::text(output)],
            metadata: None,
            extensions: None,
        },
        append: None,
        last_chunk: Some(true),
        metadata: None,
    })
}
