//! Push notifications: each update a task's stream would send ([`super::stream::told`]) is
//! POSTed, as its `StreamResponse`, to every push target the task's caller set, in order, by
//! whichever daemon runs the task. The daemon's notifier hands it every event. A target that
//! does not answer is tried again a few times and then skipped, logged: a push never holds up
//! or fails a run.

use super::stream::{told, Named};
use super::tasks::task_id;
use crate::daemon::webhook::{Reach, Webhook};
use crate::daemon::Shared;
use a2a::StreamResponse;
use ryvos::access::PushTarget;
use ryvos::Event;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// The pauses before a failed push is tried again.
const RETRIES: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(4)];

/// The setting that lets targets be inside the daemon's network.
pub(crate) const PRIVATE_KNOB: &str = "[a2a] allow_private_push_urls";

/// The pushes in flight, one chain per task, so that a task's updates arrive in order.
#[derive(Default)]
pub(crate) struct Pushes {
    chains: HashMap<String, JoinHandle<()>>,
}

impl Pushes {
    /// Pushes the updates `event` makes to its task's targets, after the task's earlier ones.
    pub(crate) fn push(&mut self, shared: &Arc<Shared>, event: &Event) {
        let named = Named {
            task: task_id(&event.run_id, &event.session_id),
            context: event.session_id.to_string(),
        };
        let Some((updates, _)) = told(&event.kind, &named) else {
            return;
        };
        self.chains.retain(|_, chain| !chain.is_finished());
        let earlier = self.chains.remove(&named.task);
        let (shared, task) = (shared.clone(), named.task.clone());
        let chain = tokio::spawn(async move {
            if let Some(earlier) = earlier {
                earlier.await.ok();
            }
            deliver(&shared, &task, &updates).await;
        });
        self.chains.insert(named.task, chain);
    }
}

/// POSTs `updates` to task `task`'s targets, if it has any.
pub(super) async fn deliver(shared: &Shared, task: &str, updates: &[StreamResponse]) {
    let targets = match shared.runtime.access().push_targets(task).await {
        Ok(targets) => targets,
        Err(e) => return tracing::warn!(task, "reading the task's push configs: {e}"),
    };
    for target in &targets {
        for update in updates {
            if let Err(e) = pushed(shared, target, update).await {
                tracing::warn!(
                    task,
                    config = target.id,
                    "a push notification was not delivered: {e}"
                );
                break;
            }
        }
    }
}

/// POSTs `update` to `target`, trying again after each of [`RETRIES`].
async fn pushed(
    shared: &Shared,
    target: &PushTarget,
    update: &StreamResponse,
) -> Result<(), String> {
    let json = serde_json::to_string(update).map_err(|e| format!("encoding the update: {e}"))?;
    let authorization = match (&target.auth_scheme, &target.auth_credentials) {
        (Some(scheme), Some(credentials)) => Some(format!("{scheme} {credentials}")),
        _ => None,
    };
    let mut headers = Vec::new();
    if let Some(token) = &target.token {
        // The two spellings receivers read: a2a-sdk's and a2a-go's.
        headers.push(("x-a2a-notification-token", token.as_str()));
        headers.push(("a2a-notification-token", token.as_str()));
    }
    if let Some(authorization) = &authorization {
        headers.push(("authorization", authorization.as_str()));
    }
    let mut pauses = RETRIES.iter();
    loop {
        // Checked on every try: the name may have come to point elsewhere since.
        let tried = match Webhook::checked(&target.url, reach(shared), PRIVATE_KNOB).await {
            Ok(webhook) => webhook.post(json.clone(), &headers).await,
            Err(e) => Err(e),
        };
        match (tried, pauses.next()) {
            (Ok(()), _) => return Ok(()),
            (Err(e), None) => return Err(e),
            (Err(_), Some(pause)) => tokio::time::sleep(*pause).await,
        }
    }
}

/// Where callers' targets may be, as `[a2a]` says.
pub(super) fn reach(shared: &Shared) -> Reach {
    match shared.config.a2a.allow_private_push_urls {
        true => Reach::Anywhere,
        false => Reach::Public,
    }
}
