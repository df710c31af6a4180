//! ryvos: the command line. Talks to `ryvosd` over its socket; `run` hosts the runtime
//! in-process when no daemon answers.
//!
//! Exit codes: 0 the run completed (or the command succeeded); 1 the run ended otherwise, or
//! the command failed; 2 bad usage or config; 3 the daemon was lost or could not be reached.

mod ctrl_c;
mod exit;
mod inline_approval;
mod out;
mod print;
mod reading;
mod render;
mod running;

use clap::{Parser, Subcommand};
use exit::{EXIT_DAEMON, EXIT_RUN_FAILED, EXIT_USAGE};
use out::outln;
use reading::{shown, Read};
use running::{run_local, run_remote, Local, Remote};
use ryvos::client::{Client, ClientError};
use ryvos::config::Config;
use ryvos::protocol::{
    AnswerParams, Approve, Call, Cancel, Deny, Interrupt, NoParams, SessionParams, Shutdown, Status,
};
use std::path::PathBuf;
use std::process::ExitCode;

/// Ryvos: run LLM agents, follow them, resume them.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// The config file (default: $RYVOS_HOME/config.toml, else built-in defaults).
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a prompt to its end; the answer streams to stdout, tool activity to stderr.
    Run {
        /// Print every event as one JSON object per line instead.
        #[arg(long)]
        json: bool,
        /// The directory the file tools work in (default: the current directory).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Use this session id (created if new).
        #[arg(long, value_name = "ID", conflicts_with = "resume")]
        session: Option<String>,
        /// Continue an existing session.
        #[arg(long, value_name = "ID")]
        resume: Option<String>,
        /// Continue the most recent session of the workspace.
        #[arg(long = "continue", conflicts_with_all = ["session", "resume"])]
        continue_latest: bool,
        /// Save the run's model traffic to FILE (JSON lines), for `provider = "replay"`.
        /// Runs in-process.
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
        /// Make the run goal-driven: the Judge holds each final answer to this goal, and the
        /// run completes only when it is accepted.
        #[arg(long, value_name = "TEXT")]
        goal: Option<String>,
        /// A success criterion of the goal, KIND:VALUE[@WEIGHT] (repeatable). KIND: contains,
        /// equals, regex (the final answer), command (exit 0 in the workspace), llm (the judge
        /// model decides). Without --goal, the prompt is the goal.
        #[arg(long, value_name = "KIND:VALUE[@WEIGHT]")]
        criterion: Vec<String>,
        /// Run as a Director: the model plans a graph of steps (each with its own goal), the
        /// independent ones run at the same time in their own sessions, and the final answer is
        /// judged. With --resume, a plan cut off by a crash goes on where it stood.
        #[arg(long)]
        director: bool,
        /// What to do. With --resume it may be left out: the session goes on from where it
        /// paused, its pending tool calls first, its turns still counted against max_turns.
        #[arg(required_unless_present_any = ["resume", "continue_latest"], num_args = 1..)]
        prompt: Vec<String>,
    },
    /// Is a daemon running? Exits 0 if one answers.
    Status {
        /// Print the answer as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// List the sessions, most recent first.
    Sessions {
        /// Print them as one JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Show a session's messages, runs and security decisions.
    History {
        /// The session id.
        id: String,
        /// Print it as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// What the runs cost: by day and by session, with the monthly limit's state.
    Cost {
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Print a session's run logs (runs, turns, tool calls) as JSON lines, oldest first.
    Logs {
        /// The session id.
        id: String,
    },
    /// List the tool calls waiting for approval.
    Approvals {
        /// Print them as one JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Pause a session's run in flight after its current step (status `interrupted`); tool
    /// calls it did not start stay pending, and `run --resume ID` runs them first.
    Interrupt {
        /// The session id.
        id: String,
    },
    /// Stop a session's run in flight for good (status `cancelled`; its turns stay stored).
    Cancel {
        /// The session id.
        id: String,
    },
    /// Approve a tool call waiting for approval (REQ from `ApprovalRequested` or `approvals`).
    Approve {
        /// The request id.
        request_id: String,
        /// Also approve the same call (the tool; for bash, the same command) for the rest of
        /// the session. Never covers a T4 call.
        #[arg(long)]
        always: bool,
    },
    /// Deny a tool call waiting for approval; the model is told, with the reason.
    Deny {
        /// The request id.
        request_id: String,
        /// Why, for the model and the audit.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Stop the daemon gracefully (runs in flight are paused: they end `interrupted`, and
    /// resume with their sessions).
    Shutdown,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match Config::load(cli.config.as_deref()) {
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
    let explicit_config = cli.config.is_some();
    let code = runtime.block_on(dispatch(cli.command, config, explicit_config));
    // An inline approval question may still wait for a line on stdin: do not wait for it.
    runtime.shutdown_background();
    ExitCode::from(code)
}

/// Runs `command`; its exit code.
///
/// Long because it is the table of subcommands: an arm each, reading its flags and calling
/// the one function that does it.
async fn dispatch(command: Command, config: Config, explicit_config: bool) -> u8 {
    let socket = match config.socket_path() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ryvos: {e}");
            return EXIT_USAGE;
        }
    };
    match command {
        Command::Run {
            json,
            workspace,
            session,
            resume,
            continue_latest,
            record,
            goal,
            criterion,
            director,
            prompt,
        } => {
            let prompt = prompt.join(" ");
            let resume = resume.or(continue_latest.then(String::new));
            if prompt.trim().is_empty() && resume.is_none() {
                eprintln!("ryvos: the prompt is empty: say what the run should do");
                return EXIT_USAGE;
            }
            if director && prompt.trim().is_empty() {
                eprintln!("ryvos: a Director run needs its task: give a prompt");
                return EXIT_USAGE;
            }
            let goal = match goal_of(goal, &criterion, &prompt) {
                Ok(goal) => goal,
                Err(e) => {
                    eprintln!("ryvos: {e}");
                    return EXIT_USAGE;
                }
            };
            let asked = workspace.clone().unwrap_or_else(|| PathBuf::from("."));
            let workspace = match workspace
                .map_or_else(std::env::current_dir, Ok)
                .and_then(|w| w.canonicalize())
            {
                Ok(w) => w,
                Err(e) => {
                    eprintln!(
                        "ryvos: the workspace {}: {e}; give an existing directory with \
                         --workspace",
                        asked.display()
                    );
                    return EXIT_USAGE;
                }
            };
            match Client::connect(&socket).await {
                Ok(_) if record.is_some() => {
                    eprintln!(
                        "ryvos: --record runs in-process, but ryvosd holds this RYVOS_HOME ({}); \
                         stop it with `ryvos shutdown` or use another RYVOS_HOME",
                        config.home.display()
                    );
                    EXIT_USAGE
                }
                Ok(mut client) => {
                    if explicit_config {
                        if let Err(why) = running::same_config(&mut client, &config).await {
                            eprintln!("ryvos: {why}");
                            return EXIT_USAGE;
                        }
                    }
                    let run = Remote {
                        json,
                        workspace,
                        session,
                        resume,
                        prompt,
                        goal,
                        director,
                        socket: socket.clone(),
                    };
                    run_remote(client, run).await
                }
                Err(ClientError::NoDaemon { .. }) => {
                    eprintln!(
                        "ryvos: no daemon answering at {}; running in-process",
                        socket.display()
                    );
                    let local = Local {
                        json,
                        workspace,
                        session,
                        resume,
                        record,
                        prompt,
                        goal,
                        director,
                    };
                    run_local(config, local).await
                }
                Err(e) => {
                    eprintln!("ryvos: {e}");
                    EXIT_DAEMON
                }
            }
        }
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
            };
            simple::<Approve>(&socket, &params, |_| outln!("approved")).await
        }
        Command::Deny { request_id, reason } => {
            let params = AnswerParams {
                request_id,
                reason,
                always: false,
            };
            simple::<Deny>(&socket, &params, |_| outln!("denied")).await
        }
        Command::Logs { id } => match ryvos::run_log::read(&config.logs_dir(), &id) {
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

/// The goal `--goal` and `--criterion` describe, if any.
fn goal_of(
    goal: Option<String>,
    criteria: &[String],
    prompt: &str,
) -> Result<Option<ryvos::Goal>, String> {
    if goal.is_none() && criteria.is_empty() {
        return Ok(None);
    }
    let criteria = criteria
        .iter()
        .map(|c| c.parse::<ryvos::Criterion>().map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(ryvos::Goal {
        description: goal.unwrap_or_else(|| prompt.to_owned()),
        criteria,
        ..ryvos::Goal::default()
    }))
}
