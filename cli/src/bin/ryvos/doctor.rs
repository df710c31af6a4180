//! `ryvos doctor`: what Ryvos needs, checked one by one — the config, the model server, the
//! sandbox, the store and the daemon — each with what to do when it fails.
//!
//! When a daemon runs, it is the one that sends the keys, confines commands and writes the
//! store: those checks are its answers, not this process's.

use crate::exit::EXIT_RUN_FAILED;
use crate::out::outln;
use ryvos::config::Config;
use ryvos::protocol::mcp::{McpServerState, McpServerStatus};
use ryvos::protocol::{NoParams, Status, StatusResult};
use ryvos_client::{Client, ClientError};
use serde::Serialize;
use std::path::Path;

/// One check's outcome.
#[derive(Serialize)]
struct Check {
    check: String,
    state: State,
    detail: String,
}

#[derive(Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
enum State {
    Ok,
    /// Works, with something to know.
    Note,
    /// Works, weakened: what protects the user is less than it should be.
    Warn,
    Fail,
}

impl Check {
    fn new(check: impl Into<String>, result: Result<String, String>) -> Self {
        let (state, detail) = match result {
            Ok(detail) => (State::Ok, detail),
            Err(detail) => (State::Fail, detail),
        };
        Self {
            check: check.into(),
            state,
            detail,
        }
    }

    /// `check` passed, but `warning` weakens it.
    fn warned(self, warning: Option<String>) -> Self {
        match (self.state, warning) {
            (State::Ok, Some(warning)) => Self {
                state: State::Warn,
                detail: format!("{}; {warning}", self.detail),
                ..self
            },
            (_, _) => self,
        }
    }

    fn note(check: &str, detail: String) -> Self {
        Self {
            check: check.into(),
            state: State::Note,
            detail,
        }
    }
}

/// Runs every check and prints them; exits 0 when none failed.
pub async fn run(config: &Config, socket: &Path, json: bool) -> u8 {
    let mut checks = vec![Check::new("config", Ok(config_source(config)))];
    let daemon = match Client::connect(socket).await {
        Ok(mut client) => match client.call::<Status>(&NoParams {}).await {
            Ok(Ok(status)) => Some(status),
            Ok(Err(e)) => {
                checks.push(Check::new("daemon", Err(e.message)));
                None
            }
            Err(e) => {
                checks.push(Check::new("daemon", Err(e.to_string())));
                None
            }
        },
        Err(ClientError::NoDaemon { .. }) => None,
        Err(e) => {
            checks.push(Check::new("daemon", Err(e.to_string())));
            None
        }
    };
    match &daemon {
        Some(status) => checks.extend(daemon_checks(status)),
        None => {
            checks.push(Check::note(
                "daemon",
                format!(
                    "none answers at {}; `ryvos run` runs in-process (start one with `ryvosd`)",
                    socket.display()
                ),
            ));
            checks.push(Check::new(
                "api key",
                ryvos::provider::keys_set(&config.model)
                    .map(|()| "every ${VAR} of the model's keys is set".to_owned())
                    .map_err(|e| e.to_string()),
            ));
            checks.push(sandbox_check(config));
            checks.extend(store_and_mcp_checks(config).await);
        }
    }
    checks.push(console_check(config, daemon.as_ref()));
    let keys_here = ryvos::provider::keys_set(&config.model).is_ok();
    if daemon.is_some() && !keys_here {
        // The daemon sends the key, and checked it at its start: this process need not have it.
        checks.push(Check::note(
            "model",
            "not probed from here: the key's variable is set only for ryvosd".into(),
        ));
    } else {
        checks.push(model_check(config).await);
    }
    print(&checks, json);
    match checks.iter().any(|c| c.state == State::Fail) {
        true => EXIT_RUN_FAILED,
        false => 0,
    }
}

/// Whether the console is served, and safely: a door `[http]` cannot open is a failure.
fn console_check(config: &Config, daemon: Option<&StatusResult>) -> Check {
    let door = config.http.door();
    // Served in plain text to other machines: allowed only knowingly, by allow_plaintext.
    let plaintext =
        matches!(&door, Ok(Some(d)) if d.tls.is_none() && !d.address.ip().is_loopback());
    let warning = plaintext.then(|| {
        "allow_plaintext: logins and approvals cross the network unencrypted unless a proxy in \
         front terminates TLS"
            .to_owned()
    });
    let served = daemon.and_then(|s| s.console.clone());
    let result = match (door, served) {
        (Err(why), _) => Err(why),
        (Ok(_), Some(origin)) => Ok(format!("served at {origin}: `ryvos console` logs in")),
        (Ok(None), None) => Ok("off ([http] listen is not set)".to_owned()),
        (Ok(Some(door)), None) => Ok(format!(
            "{} once ryvosd runs{}",
            door.address,
            if door.tls.is_some() { ", over TLS" } else { "" }
        )),
    };
    Check::new("console", result).warned(warning)
}

/// Asks the model server whether it can be used.
async fn model_check(config: &Config) -> Check {
    Check::new(
        "model",
        ryvos::provider::probe(&config.model)
            .await
            .map(|said| format!("{} {}: {said}", config.model.provider, config.model.model))
            .map_err(|e| {
                let (provider, model) = (&config.model.provider, &config.model.model);
                match e {
                    // Said with what to do already (an unset key, a model not served).
                    ryvos::provider::ProviderError::Config(why) => {
                        format!("{provider} {model}: {why}")
                    }
                    e => format!("{provider} {model}: {e}; check [model] base_url and api_key"),
                }
            }),
    )
}

fn config_source(config: &Config) -> String {
    let file = config.source.as_ref().map_or_else(
        || "no config file: the built-in defaults".to_owned(),
        |p| format!("{} is valid", p.display()),
    );
    format!("{file}; RYVOS_HOME is {}", config.home.display())
}

/// What the running daemon says about itself, its sandbox and its store.
fn daemon_checks(status: &StatusResult) -> Vec<Check> {
    let sandbox = match status.sandbox_enforced {
        true => Ok(status.sandbox.clone()),
        false => Err(status.sandbox.clone()),
    };
    let secured = status
        .store_security
        .as_ref()
        .map(|s| format!(", {s}"))
        .unwrap_or_default();
    let store = match &status.store_fault {
        None => Ok(format!("{}, writable{secured}", status.store)),
        Some(fault) => Err(format!(
            "{} cannot write: {fault}; free space or fix the disk, it reopens by itself",
            status.store
        )),
    };
    vec![
        Check::new(
            "daemon",
            Ok(format!(
                "ryvosd {} (pid {}) answers at {}, up {}s, on {}",
                status.version,
                status.pid,
                status.socket,
                status.uptime_secs,
                status.config.as_deref().unwrap_or("the built-in defaults")
            )),
        ),
        Check::new("sandbox", sandbox).warned(status.sandbox_warning.clone()),
        Check::new("store", store),
    ]
    .into_iter()
    .chain(status.mcp.iter().map(mcp_check))
    .collect()
}

/// One MCP server: ready, or why not.
fn mcp_check(server: &McpServerStatus) -> Check {
    let name = format!("mcp {}", server.name);
    match server.state {
        McpServerState::Ready => Check::new(
            name,
            Ok(format!(
                "{}: {} tools",
                server.transport,
                server.tools.len()
            )),
        ),
        McpServerState::Starting => {
            Check::note(&name, format!("{}: still starting", server.transport))
        }
        McpServerState::Down => Check::new(
            name,
            Err(format!(
                "{}: {}; fix [mcp.servers.{}]",
                server.transport,
                server.reason.as_deref().unwrap_or("down"),
                server.name
            )),
        ),
    }
}

fn sandbox_check(config: &Config) -> Check {
    let site = ryvos::SandboxSite {
        ryvos_home: config.home.clone(),
        config_file: config.source.clone(),
        ..Default::default()
    };
    let sandbox = match ryvos::Sandbox::new(&config.security.sandbox, site) {
        Ok(sandbox) => sandbox,
        Err(e) => return Check::new("sandbox", Err(format!("{e}; fix [security.sandbox]"))),
    };
    let result = match sandbox.unenforceable() {
        None => Ok(sandbox.describe()),
        Some(_) => Err(sandbox.describe()),
    };
    Check::new("sandbox", result).warned(sandbox.run_warning())
}

/// Opens the store as a run would (starting the MCP servers too), and closes it.
async fn store_and_mcp_checks(config: &Config) -> Vec<Check> {
    let place = match config.store.backend {
        ryvos::config::StoreBackend::Redb => {
            format!("redb at {}", config.database_path().display())
        }
        // The URL may hold a password: the store's own errors say what failed.
        ryvos::config::StoreBackend::Postgres => "postgres".to_owned(),
    };
    let runtime = match ryvos::Runtime::start(config.clone()).await {
        Ok(runtime) => runtime,
        Err(e) => return vec![Check::new("store", Err(format!("{place}: {e}")))],
    };
    let servers = runtime.mcp_servers().await;
    let secured = runtime
        .store_security()
        .map(|s| format!(", {s}"))
        .unwrap_or_default();
    let store = match runtime.close().await {
        Ok(()) => Ok(format!("{place}, opens and closes{secured}")),
        Err(e) => Err(format!("{place}: {e}")),
    };
    std::iter::once(Check::new("store", store))
        .chain(servers.iter().map(mcp_check))
        .collect()
}

fn print(checks: &[Check], json: bool) {
    if json {
        match serde_json::to_string_pretty(checks) {
            Ok(text) => outln!("{text}"),
            Err(e) => eprintln!("ryvos: {e}"),
        }
        return;
    }
    for check in checks {
        let mark = match check.state {
            State::Ok => "ok  ",
            State::Note => "note",
            State::Warn => "WARN",
            State::Fail => "FAIL",
        };
        outln!("{mark}  {:<8} {}", check.check, check.detail);
    }
}
