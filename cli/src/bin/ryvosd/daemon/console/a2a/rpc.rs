//! The A2A JSON-RPC endpoint (`POST /a2a`): a message starts a run (its context is the
//! session, the task is the run) and is answered once the run ends; tasks are read, listed
//! and cancelled. Reading needs a token; starting and cancelling, one that may operate.

use super::tasks::{begun, named, task_id, task_of};
use crate::daemon::console::guard::{self, Caller};
use crate::daemon::console::State;
use a2a::{
    error_code, methods as method, CancelTaskRequest, GetTaskRequest, JsonRpcError, JsonRpcRequest,
    JsonRpcResponse, ListTasksRequest, ListTasksResponse, PartContent, SendMessageRequest,
    SendMessageResponse, Task,
};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use ryvos::protocol::records::RunRecord;
use ryvos::{RunRequest, RunStatus, SessionId};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The most tasks one `ListTasks` page holds.
const PAGE: usize = 100;
/// How long a cancel waits for its run's end.
const CANCEL_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// An A2A error: its code and what it says.
type Refusal = (i32, String);

/// Answers one JSON-RPC request.
pub(in crate::daemon::console) async fn rpc(
    axum::extract::State(state): axum::extract::State<State>,
    caller: Caller,
    headers: HeaderMap,
    Json(request): Json<JsonRpcRequest>,
) -> Response {
    // A change asked with a token that may only read is refused as any HTTP request is.
    let changes = [method::SEND_MESSAGE, method::CANCEL_TASK].contains(&request.method.as_str());
    if changes && !caller.scope.operates() {
        let why = format!(
            "{} may only read: make a token with --scope operate",
            caller.by
        );
        return guard::refused(StatusCode::FORBIDDEN, &why);
    }
    let id = request.id.clone();
    let answered = match spoken(&headers) {
        Ok(()) => answer(&state, request).await,
        Err(refusal) => Err(refusal),
    };
    Json(match answered {
        Ok(result) => JsonRpcResponse::success(id, result),
        Err((code, message)) => JsonRpcResponse::error(
            id,
            JsonRpcError {
                code,
                message,
                data: None,
            },
        ),
    })
    .into_response()
}

/// Whether the request speaks A2A 1.0 (`A2A-Version`; none means 0.3, which is not served).
fn spoken(headers: &HeaderMap) -> Result<(), Refusal> {
    let version = headers
        .get(a2a::SVC_PARAM_VERSION)
        .and_then(|v| v.to_str().ok());
    match version.map(str::trim) {
        Some("1.0" | "1") => Ok(()),
        other => Err((
            error_code::VERSION_NOT_SUPPORTED,
            format!(
                "this agent speaks A2A 1.0, not {}: send the header A2A-Version: 1.0",
                other.unwrap_or("0.3 (no A2A-Version header)")
            ),
        )),
    }
}

async fn answer(state: &State, request: JsonRpcRequest) -> Result<Value, Refusal> {
    let params = request.params.unwrap_or(Value::Null);
    match request.method.as_str() {
        method::SEND_MESSAGE => {
            let sent = send(state, parsed(params)?).await?;
            Ok(encoded(&SendMessageResponse::Task(sent)))
        }
        method::GET_TASK => Ok(encoded(
            &get(state, parsed::<GetTaskRequest>(params)?.id).await?,
        )),
        method::LIST_TASKS => Ok(encoded(&list(state, parsed(params)?).await?)),
        method::CANCEL_TASK => Ok(encoded(
            &cancel(state, parsed::<CancelTaskRequest>(params)?.id).await?,
        )),
        method::SEND_STREAMING_MESSAGE | method::SUBSCRIBE_TO_TASK => Err(unsupported(
            "streaming is not served yet: send the message with SendMessage, then GetTask",
        )),
        other if other.contains("PushNotification") || other.contains("AgentCard") => {
            Err(unsupported(&format!("{other} is not served")))
        }
        other => Err((
            error_code::METHOD_NOT_FOUND,
            format!("there is no method {other}"),
        )),
    }
}

fn unsupported(why: &str) -> Refusal {
    (error_code::UNSUPPORTED_OPERATION, why.to_owned())
}

fn parsed<T: DeserializeOwned>(params: Value) -> Result<T, Refusal> {
    serde_json::from_value(params).map_err(|e| {
        (
            error_code::INVALID_PARAMS,
            format!("the params are not valid: {e}"),
        )
    })
}

fn encoded<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// Starts a run of `request`'s message and answers with its task: once it ends, or at once
/// when the caller asks to `returnImmediately`.
async fn send(state: &State, request: SendMessageRequest) -> Result<Task, Refusal> {
    let message = request.message;
    if message.task_id.is_some() {
        return Err(unsupported(
            "a message to a task already begun is not served yet: answer its approval with \
             `ryvos approve`, or continue it with `ryvos continue`",
        ));
    }
    let text: Vec<String> = (message.parts.iter())
        .filter_map(|part| match &part.content {
            PartContent::Text(text) => Some(text.clone()),
            PartContent::Data(data) => Some(data.to_string()),
            _ => None,
        })
        .collect();
    let text = text.join("\n\n");
    if text.trim().is_empty() {
        return Err((
            error_code::INVALID_PARAMS,
            "the message has no text: say what to do".into(),
        ));
    }
    let workspace = (state.shared.config.a2a.workspace())
        .map_err(internal)?
        .ok_or_else(|| unsupported("this agent serves no A2A door"))?;
    let session = match message.context_id.as_deref() {
        Some(context) if context.starts_with("s_") => SessionId::new(context),
        Some(context) => {
            return Err((
                error_code::INVALID_PARAMS,
                format!("context {context} is not one of this agent's: leave it out to begin one"),
            ))
        }
        None => SessionId::generate(),
    };
    let run = RunRequest::new(text.clone())
        .workspace(workspace)
        .session(session.clone());
    let runtime = &state.shared.runtime;
    let fail = |e: ryvos::RuntimeError| internal(e.to_string());
    let handle = runtime.run(run).await.map_err(fail)?;
    // Its record may not be stored yet: the task is told as begun.
    if request.configuration.and_then(|c| c.return_immediately) == Some(true) {
        let task = begun(&handle.run_id, &session, &text);
        state.begun.keep(&task);
        return Ok(task);
    }
    let task = task_id(&handle.run_id, &session);
    handle.outcome().await.map_err(fail)?;
    get(state, task).await
}

/// The task `task`, as far as its run has gone.
async fn get(state: &State, task: String) -> Result<Task, Refusal> {
    match found(state, &task).await {
        Ok((run, waiting)) => {
            state.begun.stored(&task);
            Ok(task_of(&run, waiting))
        }
        Err(refusal) => state.begun.get(&task).ok_or(refusal),
    }
}

/// The run a task id names, and whether a call of it waits for approval.
async fn found(state: &State, task: &str) -> Result<(RunRecord, bool), Refusal> {
    let missing = || {
        (
            error_code::TASK_NOT_FOUND,
            format!("there is no task {task}"),
        )
    };
    let (run, session) = named(task).ok_or_else(missing)?;
    let runtime = &state.shared.runtime;
    let history = runtime
        .history(&session)
        .await
        .map_err(|e| internal(e.to_string()))?;
    let record =
        (history.and_then(|h| h.runs.into_iter().find(|r| r.run_id == run))).ok_or_else(missing)?;
    let waiting = (runtime.pending_approvals().iter()).any(|p| p.run_id == run);
    Ok((record, waiting))
}

/// The tasks of a context (its runs, oldest first), or the latest task of every context.
async fn list(state: &State, request: ListTasksRequest) -> Result<ListTasksResponse, Refusal> {
    let runtime = &state.shared.runtime;
    let fail = |e: ryvos::RuntimeError| internal(e.to_string());
    let runs: Vec<RunRecord> = match request.context_id {
        Some(context) => {
            let history = runtime
                .history(&SessionId::new(context))
                .await
                .map_err(fail)?;
            history.map(|h| h.runs).unwrap_or_default()
        }
        None => {
            let mut latest = Vec::new();
            for session in runtime
                .sessions()
                .await
                .map_err(fail)?
                .into_iter()
                .take(PAGE)
            {
                let history = runtime.history(&session.session_id).await.map_err(fail)?;
                latest.extend(history.and_then(|h| h.runs.into_iter().last()));
            }
            latest
        }
    };
    let pending = runtime.pending_approvals();
    let tasks: Vec<Task> = (runs.iter())
        .map(|run| task_of(run, pending.iter().any(|p| p.run_id == run.run_id)))
        .filter(|task| {
            request
                .status
                .as_ref()
                .is_none_or(|s| *s == task.status.state)
        })
        .take(PAGE)
        .collect();
    let size = tasks.len() as i32;
    Ok(ListTasksResponse {
        tasks,
        next_page_token: String::new(),
        page_size: size,
        total_size: size,
    })
}

/// Cancels the task's run, if it is still going (or parked); the task as it ended.
async fn cancel(state: &State, task: String) -> Result<Task, Refusal> {
    let (run, _) = found(state, &task).await?;
    if run.status.is_some() && run.status != Some(RunStatus::Parked) {
        return Err((
            error_code::TASK_NOT_CANCELABLE,
            format!("task {task} has ended: it cannot be cancelled"),
        ));
    }
    let runtime = &state.shared.runtime;
    let fail = |e: ryvos::RuntimeError| internal(e.to_string());
    let stopping = match run.status {
        // A parked run is ended where it parked; one in flight is followed to its end.
        Some(_) => runtime.stop_run(&run.run_id).await.map_err(fail)?,
        None => {
            let following = runtime.follow(&run.session_id, &run.run_id);
            runtime.cancel(&run.session_id).await.map_err(fail)?;
            following
        }
    };
    tokio::time::timeout(CANCEL_PATIENCE, stopping.outcome())
        .await
        .map_err(|_| {
            internal(format!(
                "task {task} did not end within {CANCEL_PATIENCE:?}"
            ))
        })?
        .map_err(fail)?;
    get(state, task).await
}

fn internal(why: String) -> Refusal {
    (error_code::INTERNAL_ERROR, why)
}
