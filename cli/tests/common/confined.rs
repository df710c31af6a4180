//! What the confinement tests share: every tier allowed (the most trusting unattended user),
//! the model asking for `bash` calls, each call's result read back, and the daemon run as the
//! test's user and, under root, as an unprivileged one too.

use super::home::Home;
use ryvos_testkit::{Reply, ScriptedModelServer};
use serde_json::{json, Value};
use std::collections::HashMap;

pub const EVERYTHING_ALLOWED: &str =
    "t0 = \"allow\"\nt1 = \"allow\"\nt2 = \"allow\"\nt3 = \"allow\"\nt4 = \"allow\"";

/// Each tool call's (is_error, output), by call id.
pub fn results(events: &[Value]) -> HashMap<String, (bool, String)> {
    events
        .iter()
        .filter(|e| e["type"] == "ToolEnd")
        .map(|e| {
            let id = e["call_id"].as_str().unwrap().to_owned();
            let output = e["output"].as_str().unwrap_or_default().to_owned();
            (id, (e["is_error"] == json!(true), output))
        })
        .collect()
}

pub fn bash_call(id: &str, command: &str) -> (String, String, String) {
    (
        id.to_owned(),
        "bash".to_owned(),
        json!({ "command": command }).to_string(),
    )
}

/// Calls the model asks for in one answer.
pub fn asking(calls: &[(String, String, String)]) -> Reply {
    let borrowed: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, name, args)| (id.as_str(), name.as_str(), args.as_str()))
        .collect();
    Reply::tool_calls(&borrowed)
}

/// Who the daemon runs as in the default-sandbox test: the test's own user, and, when the
/// tests run as root (as CI does), an unprivileged user made for the purpose, as users run
/// `ryvosd`.
pub fn daemon_users() -> Vec<Option<(u32, u32)>> {
    let mut users = vec![None];
    // SAFETY: getuid only reads the caller's id.
    if unsafe { libc::getuid() } == 0 {
        users.push(Some(super::unprivileged::user()));
    }
    users
}

/// `ryvosd`, where `user` can run it.
pub fn ryvosd_for(user: Option<(u32, u32)>) -> std::path::PathBuf {
    match user {
        Some(_) => super::unprivileged::program("ryvosd"),
        None => env!("CARGO_BIN_EXE_ryvosd").into(),
    }
}

/// Starts `daemon` (from [`Home::command`]) as `user`, handing it the home, the workspace and
/// `more` first.
pub async fn start_as(
    home: &Home,
    mut daemon: tokio::process::Command,
    user: Option<(u32, u32)>,
    more: &[&std::path::Path],
) -> tokio::process::Child {
    if let Some((uid, gid)) = user {
        let mut paths = vec![home.path(), home.workspace.path()];
        paths.extend(more);
        super::unprivileged::hand_over(&paths, uid, gid);
        daemon.uid(uid).gid(gid);
    }
    home.daemon_from(daemon).await
}

/// A home on `server` with `sandbox` in its `[security.sandbox]` and every tier allowed, and
/// its daemon started as `user`.
pub async fn hosted_as(
    server: &ScriptedModelServer,
    user: Option<(u32, u32)>,
    sandbox: &str,
) -> (Home, tokio::process::Child) {
    let section = format!("[security.sandbox]\n{sandbox}\n");
    let home = Home::with_sections(server, "", EVERYTHING_ALLOWED, &section);
    let daemon = home.command(ryvosd_for(user));
    let child = start_as(&home, daemon, user, &[]).await;
    (home, child)
}
