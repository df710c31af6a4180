//! ryvos: the command line. Talks to `ryvosd` over its socket; `run` hosts the runtime
//! in-process when no daemon answers.
//!
//! Exit codes: 0 the run completed (or the command succeeded); 1 the run ended otherwise, or
//! the command failed; 2 bad usage or config; 3 the daemon was lost or could not be reached.

mod acp;
mod answering;
mod approval_diff;
mod calling;
mod chat;
mod cli;
mod compact;
mod console;
mod ctrl_c;
mod doctor;
mod exit;
mod following;
mod hooking;
mod host;
mod inline_approval;
mod manual;
mod mcp_server;
mod measures;
mod out;
mod parked;
mod print;
mod queue;
mod reading;
mod render;
mod rewinding;
mod run_settings;
mod running;
mod shown_config;
mod starting;
mod store_copy;
mod style;
mod tokens;
mod workspace_dir;

use clap::Parser;
use cli::{Cli, Command, CompactCommand, McpCommand, StoreCommand};
use exit::{EXIT_DAEMON, EXIT_RUN_FAILED, EXIT_USAGE};
use out::outln;
use reading::{shown, Read};
use ryvos::config::Config;
use ryvos::protocol::{
    AnswerParams, Call, Cancel, Interrupt, NoParams, SessionParams, Shutdown, Status,
};
use ryvos_client::Client;
use starting::Given;
use std::io::IsTerminal;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut cli = Cli::parse();
    let command = match cli.command.take() {
        Some(command) => command,
        // Nothing asked, at a terminal: a chat; elsewhere, the usage.
        None if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() => {
            Command::Chat(cli::ChatArgs::default())
        }
        None => {
            let usage = <Cli as clap::CommandFactory>::command().render_help();
            eprintln!("{usage}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // These describe the command line itself: no config needed, none can stop them.
    match &command {
        Command::Completions { shell } => return manual::completions(*shell),
        Command::Manpage => return manual::manpage(),
        _ => {}
    }
    let mut settings = cli.set;
    match &command {
        Command::Run(args) => settings.extend(args.run.settings()),
        Command::Submit(args) => settings.extend(args.run.settings()),
        _ => {}
    }
    let config = match Config::load_with(cli.config.as_deref(), &settings) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ryvos: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ryvos: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let given = Given {
        explicit_config: cli.config.is_some(),
        settings,
    };
    let code = runtime.block_on(dispatch(command, config, given));
    runtime.shutdown_background();
    // Whatever ended the command, the shell gets its terminal back as it was.
    if crossterm::terminal::is_raw_mode_enabled().unwrap_or(false) {
        crossterm::terminal::disable_raw_mode().ok();
    }
    ExitCode::from(code)
}

/// Runs `command`; its exit code.
///
/// Long because it is the table of subcommands: an arm each, reading its flags and calling
/// the one function that does it.
async fn dispatch(command: Command, config: Config, given: Given) -> u8 {
    let socket = match config.socket_path() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ryvos: {e}");
            return EXIT_USAGE;
        }
    };
    match command {
        Command::Run(args) => starting::run(args, given, config, socket).await,
        Command::Chat(args) => chat::chat(args, given, config, socket).await,
        Command::Submit(args) => queue::submit(args.into_run(), given, &config, &socket).await,
        Command::Runs { state, limit, json } => queue::runs(state, limit, json, &socket).await,
        Command::Wait { run, json } => queue::wait(run, json, &socket).await,
        Command::Follow { run, json } => queue::follow(run, json, &socket).await,
        Command::Continue {
            run,
            budget_cents,
            json,
            quiet,
        } => {
            let taken = parked::Taken::Continue { budget_cents };
            let shown = parked::Shown { json, quiet };
            parked::take(run, taken, shown, config, socket).await
        }
        Command::Stop { run, json } => {
            let shown = parked::Shown { json, quiet: false };
            parked::take(run, parked::Taken::Stop, shown, config, socket).await
        }
        Command::Console { open } => console::console(open, &socket).await,
        Command::Token { command } => tokens::token(command, &socket).await,
        Command::Hooks { command } => hooking::hooks(command, &socket, &config).await,
        Command::Status { json } => {
            simple::<Status>(&socket, &NoParams {}, shown(json, print::status)).await
        }
        Command::Sessions { json } => reading::answer(Read::Sessions, &socket, &config, json).await,
        Command::History { id, json } => {
            reading::answer(Read::History(id), &socket, &config, json).await
        }
        Command::Cost { json } => reading::answer(Read::Cost, &socket, &config, json).await,
        Command::Interrupt { id } => {
            simple::<Interrupt>(&socket, &SessionParams { session: id }, |_| {
                outln!("interrupting: the run pauses after its current step")
            })
            .await
        }
        Command::Cancel { id } => {
            simple::<Cancel>(&socket, &SessionParams { session: id }, |_| {
                outln!("cancelled")
            })
            .await
        }
        Command::Approvals { json } => {
            reading::answer(Read::Approvals, &socket, &config, json).await
        }
        Command::Approve { request_id, always } => {
            let params = AnswerParams {
                request_id,
                reason: None,
                always,
                by: None,
            };
            answering::answer(params, true, &socket, &config).await
        }
        Command::Deny { request_id, reason } => {
            let params = AnswerParams {
                request_id,
                reason,
                always: false,
                by: None,
            };
            answering::answer(params, false, &socket, &config).await
        }
        Command::Logs { id } => match ryvos::read_session_logs(&config.logs_dir(), &id) {
            Ok(lines) => {
                for line in lines {
                    outln!("{line}");
                }
                0
            }
            Err(e) => {
                eprintln!("ryvos: {e}");
                EXIT_RUN_FAILED
            }
        },
        Command::Shutdown => {
            simple::<Shutdown>(&socket, &NoParams {}, |_| outln!("ryvosd is stopping")).await
        }
        Command::Doctor { json } => doctor::run(&config, &socket, json).await,
        Command::Config => shown_config::print(&config),
        Command::Mcp {
            command: McpCommand::List { json },
        } => reading::answer(Read::McpServers, &socket, &config, json).await,
        Command::McpServer => mcp_server::serve(config, socket).await,
        Command::Acp => acp::serve(config, socket).await,
        Command::Store {
            command: StoreCommand::Copy { url },
        } => store_copy::copy(&url, &config, &socket).await,
        Command::Compact {
            command: CompactCommand::Undo { id, json },
        } => compact::undo(id, &socket, &config, json).await,
        Command::Rewind { point, undo, json } => {
            rewinding::rewind(point, undo, (&socket, &config), json).await
        }
        Command::Fork {
            point,
            workspace,
            json,
        } => rewinding::fork(point, workspace, (&socket, &config), json).await,
        // Answered before the config is read.
        Command::Completions { .. } | Command::Manpage => 0,
    }
}

/// Sends one request to the daemon and prints its result.
async fn simple<C: Call>(
    socket: &std::path::Path,
    params: &C::Params,
    print: impl FnOnce(&C::Result),
) -> u8 {
    match Client::connect(socket).await {
        Ok(mut client) => reading::call::<C>(&mut client, params, print).await,
        Err(e) => {
            eprintln!("ryvos: {e}; start one with `ryvosd`");
            EXIT_DAEMON
        }
    }
}
