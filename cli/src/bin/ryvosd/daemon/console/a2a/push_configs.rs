//! A task's push notification configs (`CreateTaskPushNotificationConfig`, get, list, delete,
//! and one given with a message): kept in the store ([`ryvos::access`]) so that whichever
//! daemon runs the task pushes to them. Their URL is checked when set, as it is on every push.

use super::found::{found, record};
use super::push::{reach, PRIVATE_KNOB};
use super::refusal::{internal, not_found, Refusal};
use super::tasks::task_of;
use crate::daemon::console::State;
use crate::daemon::webhook::Webhook;
use a2a::{
    error_code, AuthenticationInfo, DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest, ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse, StreamResponse, TaskPushNotificationConfig,
};
use ryvos::access::{check_push_target_id, AccessError, PushTarget};

/// The id a config is given when its caller gives none.
const DEFAULT_ID: &str = "default";

/// Sets `config` on its task, which must exist; the config as kept.
pub(super) async fn create(
    state: &State,
    config: TaskPushNotificationConfig,
) -> Result<TaskPushNotificationConfig, Refusal> {
    record(state, &config.task_id).await?;
    let target = checked(state, config).await?;
    kept(state, target).await
}

/// `config` as a push target, if it may be one: its URL where this daemon may POST, its id
/// one. Checked before a message that gives it starts anything.
pub(super) async fn checked(
    state: &State,
    config: TaskPushNotificationConfig,
) -> Result<PushTarget, Refusal> {
    let invalid = |why: String| (error_code::INVALID_PARAMS, why);
    Webhook::checked(&config.url, reach(&state.shared), PRIVATE_KNOB)
        .await
        .map_err(|e| invalid(format!("the push notification URL: {e}")))?;
    let id = config.id.unwrap_or_else(|| DEFAULT_ID.into());
    check_push_target_id(&id).map_err(|e| invalid(e.to_string()))?;
    let (auth_scheme, auth_credentials) = match config.authentication {
        Some(AuthenticationInfo {
            scheme,
            credentials,
        }) => (Some(scheme), credentials),
        None => (None, None),
    };
    Ok(PushTarget {
        task: config.task_id,
        id,
        url: config.url,
        token: config.token,
        auth_scheme,
        auth_credentials,
    })
}

/// Sets `target` on task `task`, just begun (or answered) by a message that gave it, and
/// pushes the task as it stands if it has ended or waits already: its run may have got there
/// before the target was kept.
pub(super) async fn given(
    state: &State,
    task: &str,
    mut target: PushTarget,
) -> Result<(), Refusal> {
    target.task = task.to_owned();
    kept(state, target).await?;
    if let Ok((run, waiting)) = found(state, task).await {
        if run.status.is_some() || waiting {
            // Off the request's path: a push never holds anything up.
            let (shared, task) = (state.shared.clone(), task.to_owned());
            let now = StreamResponse::Task(task_of(&run, waiting));
            tokio::spawn(async move { super::push::deliver(&shared, &task, &[now]).await });
        }
    }
    Ok(())
}

async fn kept(state: &State, target: PushTarget) -> Result<TaskPushNotificationConfig, Refusal> {
    let access = state.shared.runtime.access();
    access
        .set_push_target(target.clone())
        .await
        .map_err(|e| match e {
            AccessError::Refused(why) => (error_code::INVALID_PARAMS, why),
            AccessError::Store(e) => internal(e.to_string()),
        })?;
    Ok(config_of(target))
}

pub(super) async fn get(
    state: &State,
    request: GetTaskPushNotificationConfigRequest,
) -> Result<TaskPushNotificationConfig, Refusal> {
    let access = state.shared.runtime.access();
    let held = (access.push_target(&request.task_id, &request.id).await)
        .map_err(|e| internal(e.to_string()))?;
    held.map(config_of)
        .ok_or_else(|| missing(&request.task_id, &request.id))
}

pub(super) async fn list(
    state: &State,
    request: ListTaskPushNotificationConfigsRequest,
) -> Result<ListTaskPushNotificationConfigsResponse, Refusal> {
    record(state, &request.task_id).await?;
    let access = state.shared.runtime.access();
    let held =
        (access.push_targets(&request.task_id).await).map_err(|e| internal(e.to_string()))?;
    Ok(ListTaskPushNotificationConfigsResponse {
        configs: held.into_iter().map(config_of).collect(),
        next_page_token: None,
    })
}

pub(super) async fn delete(
    state: &State,
    request: DeleteTaskPushNotificationConfigRequest,
) -> Result<(), Refusal> {
    let access = state.shared.runtime.access();
    let removed = (access
        .remove_push_target(&request.task_id, &request.id)
        .await)
        .map_err(|e| internal(e.to_string()))?;
    match removed {
        true => Ok(()),
        false => Err(missing(&request.task_id, &request.id)),
    }
}

/// Task `task` has no push config `id`.
fn missing(task: &str, id: &str) -> Refusal {
    not_found(&format!("{task} with push notification config {id}"))
}

fn config_of(target: PushTarget) -> TaskPushNotificationConfig {
    let authentication = target.auth_scheme.map(|scheme| AuthenticationInfo {
        scheme,
        credentials: target.auth_credentials,
    });
    TaskPushNotificationConfig {
        url: target.url,
        id: Some(target.id),
        task_id: target.task,
        token: target.token,
        authentication,
        tenant: None,
    }
}
