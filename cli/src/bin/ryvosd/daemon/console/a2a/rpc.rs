//! The A2A JSON-RPC endpoint (`POST /a2a`): a message starts a run (its context is the
//! session, the task is the run) or answers a task that waits ([`super::send`]), and is
//! answered when the task ends or waits for input, or streamed as it goes
//! ([`super::stream`]); tasks are read, listed, cancelled and followed. Reading needs a
//! token; what changes something, one that may operate.

use super::found::{found, record};
use super::push_configs;
use super::refusal::{internal, not_found, unsupported, Refusal};
use super::send::Going;
use super::tasks::{latest_of, named, task_of};
use crate::daemon::console::guard::{self, Caller};
use crate::daemon::console::State;
use a2a::{
    error_code, methods as method, CancelTaskRequest, GetTaskRequest, JsonRpcError, JsonRpcId,
    JsonRpcRequest, JsonRpcResponse, ListTasksRequest, ListTasksResponse, SendMessageRequest,
    SendMessageResponse, SubscribeToTaskRequest, Task,
};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use ryvos::{EventKind, RunHandle, RunStatus, SessionId};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The most tasks one `ListTasks` page holds.
const PAGE: usize = 100;
/// How long a cancel waits for its run's end.
const CANCEL_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// Answers one JSON-RPC request.
pub(in crate::daemon::console) async fn rpc(
    axum::extract::State(state): axum::extract::State<State>,
    caller: Caller,
    headers: HeaderMap,
    Json(request): Json<JsonRpcRequest>,
) -> Response {
    // Off unless `[a2a] workspace` is set: then there is no A2A door at all.
    if state.shared.a2a.is_none() {
        return StatusCode::NOT_FOUND.into_response();
    }
    // Programs call with a token; a browser's console session is not a caller here.
    if caller.cookie.is_some() {
        let why = "A2A takes a bearer token: `ryvos token create NAME --scope operate`";
        return guard::refused(StatusCode::UNAUTHORIZED, why);
    }
    // A change asked with a token that may only read is refused as any HTTP request is. Push
    // configs hold their webhooks' credentials: only a token that may operate sees them.
    let operating = [
        method::SEND_MESSAGE,
        method::SEND_STREAMING_MESSAGE,
        method::CANCEL_TASK,
        method::CREATE_PUSH_CONFIG,
        method::GET_PUSH_CONFIG,
        method::LIST_PUSH_CONFIGS,
        method::DELETE_PUSH_CONFIG,
    ];
    if operating.contains(&request.method.as_str()) && !caller.scope.operates() {
        let why = format!(
            "{} may only read: make a token with --scope operate",
            caller.by
        );
        return guard::refused(StatusCode::FORBIDDEN, &why);
    }
    let id = request.id.clone();
    if let Err(refusal) = spoken(&headers) {
        return failed(id, refusal);
    }
    let params = request.params.unwrap_or(Value::Null);
    let by = format!("{} (A2A)", caller.by);
    let streamed = match request.method.as_str() {
        method::SEND_STREAMING_MESSAGE => going_on(&state, params, &by).await,
        method::SUBSCRIBE_TO_TASK => subscribed(&state, params).await,
        method => {
            return match answer(&state, method, params, &by).await {
                Ok(result) => Json(JsonRpcResponse::success(id, result)).into_response(),
                Err(refusal) => failed(id, refusal),
            }
        }
    };
    match streamed {
        Ok((task, run, ended)) => super::stream::streamed(id, task, run, ended),
        Err(refusal) => failed(id, refusal),
    }
}

/// Request `id` refused.
fn failed(id: JsonRpcId, (code, message): Refusal) -> Response {
    let error = JsonRpcError {
        code,
        message,
        data: None,
    };
    Json(JsonRpcResponse::error(id, error)).into_response()
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

async fn answer(state: &State, method: &str, params: Value, by: &str) -> Result<Value, Refusal> {
    match method {
        method::SEND_MESSAGE => {
            let request: SendMessageRequest = parsed(params)?;
            let configuration = request.configuration.as_ref();
            let immediately = configuration.and_then(|c| c.return_immediately);
            let going = sent(state, request, by).await?;
            if immediately != Some(true) {
                settled(going.run).await;
            }
            let task = get(state, going.task.id).await?;
            encoded(&SendMessageResponse::Task(task))
        }
        method::GET_TASK => encoded(&get(state, parsed::<GetTaskRequest>(params)?.id).await?),
        method::LIST_TASKS => encoded(&list(state, parsed(params)?).await?),
        method::CANCEL_TASK => {
            encoded(&cancel(state, parsed::<CancelTaskRequest>(params)?.id).await?)
        }
        method::CREATE_PUSH_CONFIG => encoded(&push_configs::create(state, parsed(params)?).await?),
        method::GET_PUSH_CONFIG => encoded(&push_configs::get(state, parsed(params)?).await?),
        method::LIST_PUSH_CONFIGS => encoded(&push_configs::list(state, parsed(params)?).await?),
        method::DELETE_PUSH_CONFIG => {
            push_configs::delete(state, parsed(params)?).await?;
            Ok(Value::Null)
        }
        other if other.contains("AgentCard") => Err(unsupported(&format!("{other} is not served"))),
        other => Err((
            error_code::METHOD_NOT_FOUND,
            format!("there is no method {other}"),
        )),
    }
}

/// What a streamed message set going: its task, the run to follow, and whether it has ended.
async fn going_on(
    state: &State,
    params: Value,
    by: &str,
) -> Result<(Task, RunHandle, bool), Refusal> {
    let going = sent(state, parsed(params)?, by).await?;
    Ok((going.task, going.run, false))
}

/// What `request`'s message set going, with the push config it gives (checked before anything
/// starts) kept for its task.
async fn sent(state: &State, request: SendMessageRequest, by: &str) -> Result<Going, Refusal> {
    let push = request
        .configuration
        .and_then(|c| c.task_push_notification_config);
    let push = match push {
        Some(config) => Some(push_configs::checked(state, config).await?),
        None => None,
    };
    let going = super::send::going(state, request.message, by).await?;
    if let Some(push) = push {
        push_configs::given(state, &going.task.id, push).await?;
    }
    Ok(going)
}

/// A task to follow (`SubscribeToTask`): as it stands, its run from now, and whether it has
/// ended or waits for input already (then only the task is sent).
async fn subscribed(state: &State, params: Value) -> Result<(Task, RunHandle, bool), Refusal> {
    let task = parsed::<SubscribeToTaskRequest>(params)?.id;
    let (run, session) = named(&task).ok_or_else(|| not_found(&task))?;
    // Followed from before it is read, so an end between the two is not missed.
    let following = state.shared.runtime.follow(&session, &run);
    let (record, waiting) = found(state, &task).await?;
    let ended = record.status.is_some() || waiting;
    Ok((task_of(&record, waiting), following, ended))
}

/// Waits until `run` ends or waits for a person's approval.
async fn settled(mut run: RunHandle) {
    while let Some(event) = run.next_event().await {
        if matches!(event.kind, EventKind::ApprovalRequested { .. }) {
            return;
        }
    }
}

fn parsed<T: DeserializeOwned>(params: Value) -> Result<T, Refusal> {
    serde_json::from_value(params).map_err(|e| {
        (
            error_code::INVALID_PARAMS,
            format!("the params are not valid: {e}"),
        )
    })
}

/// `value` as the result's JSON; a value that cannot be encoded is this agent's failure.
fn encoded<T: serde::Serialize>(value: &T) -> Result<Value, Refusal> {
    serde_json::to_value(value).map_err(|e| internal(format!("encoding the result: {e}")))
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

/// The tasks of a context (its runs, oldest first), or the latest task of every context.
async fn list(state: &State, request: ListTasksRequest) -> Result<ListTasksResponse, Refusal> {
    let runtime = &state.shared.runtime;
    let fail = |e: ryvos::RuntimeError| internal(e.to_string());
    let pending = crate::daemon::approvals::pending(&state.shared).await;
    let waits = |run: &ryvos::RunId| pending.iter().any(|p| p.run_id == *run);
    let tasks: Vec<Task> = match request.context_id {
        Some(context) => {
            let session = SessionId::new(context);
            let runs = (runtime.shared_store().session_runs(&session).await)
                .map_err(|e| internal(e.to_string()))?;
            runs.iter()
                .map(|run| task_of(run, waits(&run.run_id)))
                .collect()
        }
        // Each context's latest task, from the sessions' records alone: no history is read.
        None => (runtime.sessions().await.map_err(fail)?.iter())
            .filter_map(|s| latest_of(s, s.last_run.as_ref().is_some_and(waits)))
            .collect(),
    };
    let wanted = |task: &Task| {
        request
            .status
            .as_ref()
            .is_none_or(|s| *s == task.status.state)
    };
    let tasks: Vec<Task> = tasks.into_iter().filter(wanted).take(PAGE).collect();
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
    let run = record(state, &task).await?;
    if run.status.is_some() && run.status != Some(RunStatus::Parked) {
        return Err((
            error_code::TASK_NOT_CANCELABLE,
            format!("task {task} has ended: it cannot be cancelled"),
        ));
    }
    let runtime = &state.shared.runtime;
    let fail = |e: ryvos::RuntimeError| internal(e.to_string());
    // A parked run is ended where it parked; one in flight is cancelled, and followed.
    let stopping = runtime.stop_run(&run.run_id).await.map_err(fail)?;
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
