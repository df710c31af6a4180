//! How the read commands (`sessions`, `history`, `cost`, `approvals`) answer: from the daemon
//! when one runs; else from the store directly, through a runtime hosted for the read (redb's
//! lock keeps it from opening beside a daemon).

use crate::exit::{EXIT_DAEMON, EXIT_RUN_FAILED};
use crate::out::outln;
use crate::print;
use ryvos::config::Config;
use ryvos::protocol::{
    Approvals, Call, Cost, History, NoParams, SessionParams, Sessions, Status, StatusResult,
};
use ryvos::{Runtime, SessionId};
use ryvos_client::{Client, ClientError};

/// A read command.
pub enum Read {
    Sessions,
    History(String),
    Cost,
    Approvals,
    /// The MCP servers (`ryvos mcp list`).
    McpServers,
}

/// Answers `read` and prints the answer (as JSON with `json`); the exit code.
pub async fn answer(read: Read, socket: &std::path::Path, config: &Config, json: bool) -> u8 {
    match Client::connect(socket).await {
        Ok(client) => from_daemon(client, read, json).await,
        Err(ClientError::NoDaemon { .. }) => from_store(read, config, json).await,
        Err(e) => {
            eprintln!("ryvos: {e}");
            EXIT_DAEMON
        }
    }
}

async fn from_daemon(mut client: Client, read: Read, json: bool) -> u8 {
    match read {
        Read::Sessions => {
            call::<Sessions>(
                &mut client,
                &NoParams {},
                shown(json, |s: &Vec<_>| print::sessions(s)),
            )
            .await
        }
        Read::History(session) => {
            let params = SessionParams { session };
            call::<History>(&mut client, &params, shown(json, print::history)).await
        }
        Read::Cost => call::<Cost>(&mut client, &NoParams {}, shown(json, print::cost)).await,
        Read::Approvals => {
            let print = |p: &Vec<_>| print::approvals(p);
            call::<Approvals>(&mut client, &NoParams {}, shown(json, print)).await
        }
        Read::McpServers => {
            let print = |s: &StatusResult| shown(json, |m: &Vec<_>| print::mcp_servers(m))(&s.mcp);
            call::<Status>(&mut client, &NoParams {}, print).await
        }
    }
}

/// Runs `work` on this home's store directly, with no daemon: a runtime started for it (on
/// `config`), closed after; the exit code.
pub async fn on_the_store(config: Config, work: impl AsyncFnOnce(&Runtime) -> u8) -> u8 {
    let runtime = match Runtime::start(config).await {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("ryvos: no daemon answers, and the store cannot be opened: {e}");
            return EXIT_RUN_FAILED;
        }
    };
    let code = work(&runtime).await;
    if let Err(e) = runtime.close().await {
        eprintln!("ryvos: closing the store: {e}");
        return EXIT_RUN_FAILED;
    }
    code
}

/// `config` for a command that needs the store only: no MCP server started.
pub fn store_only(config: &Config) -> Config {
    Config {
        mcp: Default::default(),
        ..config.clone()
    }
}

async fn from_store(read: Read, config: &Config, json: bool) -> u8 {
    let config = match read {
        Read::McpServers => config.clone(),
        _ => store_only(config),
    };
    on_the_store(config, async |runtime| read_here(read, runtime, json).await).await
}

/// Answers `read` from `runtime`'s store.
async fn read_here(read: Read, runtime: &Runtime, json: bool) -> u8 {
    match read {
        Read::Sessions => printed(
            runtime.sessions().await,
            shown(json, |s: &Vec<_>| print::sessions(s)),
        ),
        Read::History(session) => match runtime.history(&SessionId::new(session.as_str())).await {
            Ok(Some(history)) => {
                shown(json, print::history)(&history);
                0
            }
            Ok(None) => {
                eprintln!("ryvos: there is no session {session}; `ryvos sessions` lists them");
                EXIT_RUN_FAILED
            }
            Err(e) => {
                eprintln!("ryvos: {e}");
                EXIT_RUN_FAILED
            }
        },
        Read::Cost => printed(runtime.cost_report().await, shown(json, print::cost)),
        Read::Approvals => {
            let print = |p: &Vec<_>| print::approvals(p);
            shown(json, print)(&runtime.pending_approvals());
            0
        }
        Read::McpServers => {
            let print = |m: &Vec<_>| print::mcp_servers(m);
            shown(json, print)(&runtime.mcp_servers().await);
            0
        }
    }
}

/// Prints `result` with `print`; the exit code.
fn printed<R, E: std::fmt::Display>(result: Result<R, E>, print: impl FnOnce(&R)) -> u8 {
    match result {
        Ok(value) => {
            print(&value);
            0
        }
        Err(e) => {
            eprintln!("ryvos: {e}");
            EXIT_RUN_FAILED
        }
    }
}

/// Asks the daemon and prints its answer; the exit code.
pub async fn call<C: Call>(
    client: &mut Client,
    params: &C::Params,
    print: impl FnOnce(&C::Result),
) -> u8 {
    call_then::<C>(client, params, |result| {
        print(result);
        0
    })
    .await
}

/// Asks the daemon and hands its answer to `then`, whose exit code it is; a refusal or a
/// lost daemon says so and exits as such.
pub async fn call_then<C: Call>(
    client: &mut Client,
    params: &C::Params,
    then: impl FnOnce(&C::Result) -> u8,
) -> u8 {
    match client.call::<C>(params).await {
        Ok(Ok(result)) => then(&result),
        Ok(Err(error)) => {
            eprintln!("ryvos: {}", error.message);
            EXIT_RUN_FAILED
        }
        Err(e) => {
            eprintln!("ryvos: {e}");
            EXIT_DAEMON
        }
    }
}

/// Prints a result as `print` does, or, with `--json`, as one JSON value on one line.
pub fn shown<R: serde::Serialize>(json: bool, print: impl FnOnce(&R)) -> impl FnOnce(&R) {
    move |result| {
        if !json {
            return print(result);
        }
        match serde_json::to_string(result) {
            Ok(line) => outln!("{line}"),
            Err(e) => eprintln!("ryvos: the answer cannot be written as JSON: {e}"),
        }
    }
}

/// Asks `C` of the daemon when one answers, else does `here` on this home's store directly
/// (a runtime started for it); prints the answer with `print`; the exit code: 1 for a
/// refusal.
pub async fn through_daemon_or_here<C: Call>(
    socket: &std::path::Path,
    config: &Config,
    params: C::Params,
    print: impl FnOnce(&C::Result),
    here: impl AsyncFnOnce(&Runtime, C::Params) -> Result<C::Result, ryvos::RuntimeError>,
) -> u8 {
    match Client::connect(socket).await {
        Ok(mut client) => call::<C>(&mut client, &params, print).await,
        Err(ClientError::NoDaemon { .. }) => {
            let work = async |runtime: &Runtime| match here(runtime, params).await {
                Ok(result) => {
                    print(&result);
                    0
                }
                Err(e) => {
                    eprintln!("ryvos: {e}");
                    EXIT_RUN_FAILED
                }
            };
            on_the_store(store_only(config), work).await
        }
        Err(e) => {
            eprintln!("ryvos: {e}");
            EXIT_DAEMON
        }
    }
}
