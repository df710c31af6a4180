//! Telling someone a run parked or a call waits for approval, for a daemon nobody watches:
//! `[daemon] notify_command` is run and `notify_url` is POSTed the `RunParked` or
//! `ApprovalRequested` event. With the console served, an approval's notification carries
//! signed single-use links to approve or deny it (`links` in the JSON, `RYVOS_APPROVE_URL`
//! and `RYVOS_DENY_URL` for the command). Each is bounded in time, and what goes wrong is
//! logged: a notification never holds up or fails a run. The same watch tells A2A callers'
//! push targets of their tasks ([`Pushes`]).

use super::console::links::{self, Links};
use super::console::Pushes;
use super::webhook::{Reach, Webhook};
use super::Shared;
use ryvos::{Event, EventKind};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::broadcast::error::RecvError;

/// How long a notify command may run before it is killed.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// Starts the notifier when there is someone to tell: the operator's command or webhook, or
/// A2A callers' push targets (when the A2A door is served); it ends with the daemon.
pub(super) fn spawn(shared: Arc<Shared>) -> Option<tokio::task::JoinHandle<()>> {
    let daemon = &shared.config.daemon;
    let operator = !daemon.notify_command.is_empty() || !daemon.notify_url.is_empty();
    let a2a = shared.a2a.is_some();
    if !operator && !a2a {
        return None;
    }
    let mut events = shared.runtime.subscribe();
    let mut pushes = Pushes::default();
    Some(tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                next = events.recv() => next,
                () = shared.shutdown.cancelled() => return,
            };
            let event = match event {
                Ok(event) => event,
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!("the notifier fell behind by {n} events; some go untold");
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            let waits = matches!(
                event.kind,
                EventKind::RunParked { .. } | EventKind::ApprovalRequested { .. }
            );
            if operator && waits {
                tokio::spawn(notify(shared.clone(), event.clone()));
            }
            if a2a {
                pushes.push(&shared, &event);
            }
        }
    }))
}

/// Tells the configured command and webhook that `event`'s run parked, or that its call
/// waits for approval.
async fn notify(shared: Arc<Shared>, event: Arc<Event>) {
    let links = match &event.kind {
        EventKind::ApprovalRequested { request_id, .. } => {
            match links::for_request(&shared, request_id).await {
                Ok(links) => links,
                Err(e) => {
                    tracing::warn!(run = %event.run_id, "approval links could not be made: {e}");
                    None
                }
            }
        }
        _ => None,
    };
    let json = match told(&event, links.as_ref()) {
        Ok(json) => json,
        Err(e) => return tracing::warn!("the event could not be told: {e}"),
    };
    let daemon = &shared.config.daemon;
    if let Some((program, args)) = daemon.notify_command.split_first() {
        if let Err(e) = run_command(program, args, &event, links.as_ref(), &json).await {
            tracing::warn!(run = %event.run_id, "[daemon] notify_command: {e}");
        }
    }
    if !daemon.notify_url.is_empty() {
        if let Err(e) = post(&daemon.notify_url, json).await {
            tracing::warn!(run = %event.run_id, "[daemon] notify_url: {e}");
        }
    }
}

/// The event as JSON, with its approval links as `links` when it has them.
fn told(event: &Event, links: Option<&Links>) -> Result<String, serde_json::Error> {
    let mut json = serde_json::to_value(event)?;
    if let (Some(links), Some(fields)) = (links, json.as_object_mut()) {
        fields.insert("links".into(), serde_json::to_value(links)?);
    }
    serde_json::to_string(&json)
}

/// Runs `program args`, the event on its stdin, to its end (at most [`COMMAND_TIMEOUT`]).
async fn run_command(
    program: &str,
    args: &[String],
    event: &Event,
    links: Option<&Links>,
    json: &str,
) -> Result<(), String> {
    let (reason, request) = match &event.kind {
        EventKind::RunParked { reason, .. } => (reason.as_str(), ""),
        EventKind::ApprovalRequested { request_id, .. } => ("", request_id.as_str()),
        _ => ("", ""),
    };
    let link = |pick: fn(&Links) -> &str| links.map_or("", pick);
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .env("RYVOS_RUN_ID", event.run_id.as_str())
        .env("RYVOS_SESSION_ID", event.session_id.as_str())
        .env("RYVOS_PARK_REASON", reason)
        .env("RYVOS_REQUEST_ID", request)
        .env("RYVOS_APPROVE_URL", link(|l| &l.approve))
        .env("RYVOS_DENY_URL", link(|l| &l.deny))
        .env("RYVOS_CONSOLE_URL", link(|l| &l.open))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{program} could not be started: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that does not read its stdin is not an error.
        stdin.write_all(json.as_bytes()).await.ok();
    }
    let done = tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| format!("{program} ran past {COMMAND_TIMEOUT:?} and was killed"))?
        .map_err(|e| format!("{program}: {e}"))?;
    if done.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&done.stderr);
    Err(format!(
        "{program} exited with {}: {}",
        done.status,
        said.trim()
    ))
}

/// POSTs `json` to the operator's `url`.
async fn post(url: &str, json: String) -> Result<(), String> {
    let webhook = Webhook::checked(url, Reach::Anywhere, "[daemon] notify_url").await?;
    webhook.post(json, &[]).await
}
