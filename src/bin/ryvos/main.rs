//! ryvos: the command line. Talks to `ryvosd` over its socket; `run` hosts the runtime
//! in-process when no daemon answers.
//!
//! Exit codes: 0 the run completed (or the command succeeded); 1 the run ended otherwise, or
//! the command failed; 2 bad usage or config; 3 the daemon was lost or could not be reached.

mod inline_approval;
mod render;

use clap::{Parser, Subcommand};
use render::Renderer;
use ryvos::client::{Client, ClientError};
use ryvos::config::Config;
use ryvos::protocol::Reply;
use ryvos::{EventKind, RunRequest, RunStatus, Runtime, SessionId};
use serde_json::{json, Value};
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
        #[arg(required_unless_present = "resume", num_args = 1..)]
        prompt: Vec<String>,
    },
    /// Is a daemon running? Exits 0 if one answers.
    Status,
    /// List the sessions, most recent first.
    Sessions,
    /// Show a session's messages and runs.
    History {
        /// The session id.
        id: String,
    },
    /// Token usage of recent runs (prices are not applied yet).
    Cost,
    /// Print a session's run logs (runs, turns, tool calls) as JSON lines, oldest first.
    Logs {
        /// The session id.
        id: String,
    },
    /// List the tool calls waiting for approval.
    Approvals,
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

const EXIT_RUN_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_DAEMON: u8 = 3;

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
    let code = runtime.block_on(dispatch(cli.command, config));
    // An inline approval question may still wait for a line on stdin: do not wait for it.
    runtime.shutdown_background();
    ExitCode::from(code)
}

async fn dispatch(command: Command, config: Config) -> u8 {
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
            record,
            goal,
            criterion,
            director,
            prompt,
        } => {
            let prompt = prompt.join(" ");
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
            let workspace = match workspace
                .map_or_else(std::env::current_dir, Ok)
                .and_then(|w| w.canonicalize())
            {
                Ok(w) => w,
                Err(e) => {
                    eprintln!("ryvos: the workspace: {e}");
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
                Ok(client) => {
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
                        session: session.or(resume),
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
        Command::Status => {
            simple(&socket, "status", json!({}), |v| {
                println!(
                    "ryvosd is running: pid {}, version {}, up {}s, home {}",
                    v["pid"],
                    v["version"].as_str().unwrap_or("?"),
                    v["uptime_secs"],
                    v["home"].as_str().unwrap_or("?")
                );
                println!("sandbox: {}", v["sandbox"].as_str().unwrap_or("?"));
            })
            .await
        }
        Command::Sessions => {
            simple(&socket, "sessions", json!({}), |v| {
                let sessions = v.as_array().cloned().unwrap_or_default();
                if sessions.is_empty() {
                    println!("no sessions yet");
                }
                for s in sessions {
                    println!(
                        "{}  {} messages  last run {}",
                        s["session_id"].as_str().unwrap_or("?"),
                        s["message_count"],
                        s["last_run"].as_str().unwrap_or("-")
                    );
                }
            })
            .await
        }
        Command::History { id } => {
            simple(&socket, "history", json!({"session": id}), print_history).await
        }
        Command::Cost => simple(&socket, "cost", json!({}), print_cost).await,
        Command::Interrupt { id } => {
            simple(&socket, "interrupt", json!({"session": id}), |_| {
                println!("interrupting: the run pauses after its current step")
            })
            .await
        }
        Command::Cancel { id } => {
            simple(&socket, "cancel", json!({"session": id}), |_| {
                println!("cancelled")
            })
            .await
        }
        Command::Approvals => {
            simple(&socket, "approvals", json!({}), |v| {
                let pending = v.as_array().cloned().unwrap_or_default();
                if pending.is_empty() {
                    println!("no tool call is waiting for approval");
                }
                for p in pending {
                    let state = match (p["paused"].as_bool(), p["answer"]["approved"].as_bool()) {
                        (Some(true), Some(true)) => "  [run paused; approved, runs on resume]",
                        (Some(true), Some(false)) => "  [run paused; denied]",
                        (Some(true), None) => "  [run paused; asked again on resume]",
                        _ => "",
                    };
                    println!(
                        "{}  {} {}  {}  (session {}){state}",
                        p["request_id"].as_str().unwrap_or("?"),
                        p["tier"].as_str().unwrap_or("?"),
                        p["tool"].as_str().unwrap_or("?"),
                        p["input"],
                        p["session_id"].as_str().unwrap_or("?")
                    );
                }
            })
            .await
        }
        Command::Approve { request_id, always } => {
            let params = json!({"request_id": request_id, "always": always});
            simple(&socket, "approve", params, |_| println!("approved")).await
        }
        Command::Deny { request_id, reason } => {
            let params = json!({"request_id": request_id, "reason": reason});
            simple(&socket, "deny", params, |_| println!("denied")).await
        }
        Command::Logs { id } => match ryvos::run_log::read(&config.logs_dir(), &id) {
            Ok(lines) => {
                for line in lines {
                    println!("{line}");
                }
                0
            }
            Err(e) => {
                eprintln!("ryvos: {e}");
                EXIT_RUN_FAILED
            }
        },
        Command::Shutdown => {
            simple(&socket, "shutdown", json!({}), |_| {
                println!("ryvosd is stopping")
            })
            .await
        }
    }
}

/// Sends one request and prints its result.
async fn simple(
    socket: &std::path::Path,
    method: &str,
    params: Value,
    print: impl FnOnce(&Value),
) -> u8 {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ryvos: {e}; start one with `ryvosd`");
            return EXIT_DAEMON;
        }
    };
    match client.call(method, params).await {
        Ok(Ok(result)) => {
            print(&result);
            0
        }
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

fn print_history(v: &Value) {
    for m in v["messages"].as_array().into_iter().flatten() {
        let message = &m["message"];
        let role = message["role"].as_str().unwrap_or("?");
        let text = message["content"].as_str().unwrap_or_default();
        println!("[{}] {role}: {text}", m["seq"]);
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            println!(
                "      call {} {} {}",
                call["id"].as_str().unwrap_or("?"),
                call["name"].as_str().unwrap_or("?"),
                call["arguments"].as_str().unwrap_or("")
            );
        }
    }
    for r in v["runs"].as_array().into_iter().flatten() {
        println!(
            "run {}: {} ({} turns)",
            r["run_id"].as_str().unwrap_or("?"),
            r["status"].as_str().unwrap_or("in flight"),
            r["turns"]
        );
    }
}

/// `ryvos cost`: this month against the limits, then each day and each session.
fn print_cost(v: &Value) {
    let cents = |c: &Value| c.as_f64().unwrap_or(0.0);
    let money = |c: f64| {
        if c >= 1.0 || c == 0.0 {
            format!("${:.2}", c / 100.0)
        } else {
            format!("${:.4}", c / 100.0)
        }
    };
    let limit = |key: &str| match v[key].as_u64() {
        Some(0) | None => "no limit".to_owned(),
        Some(c) => money(c as f64),
    };
    let line = |s: &Value| {
        format!(
            "{:>10}  {:>5} calls  {} in / {} out tokens",
            money(cents(&s["cost_cents"])),
            s["calls"],
            s["input_tokens"],
            s["output_tokens"]
        )
    };
    let month = &v["month"];
    println!(
        "this month ({}, UTC): {} spent; monthly limit {}, warning at {}; per-run limit {}",
        month["key"].as_str().unwrap_or("?"),
        money(cents(&month["cost_cents"])),
        limit("monthly_limit_cents"),
        limit("warning_threshold_cents"),
        limit("per_run_limit_cents"),
    );
    if let Some(until) = v["refused_until"].as_str() {
        println!("  the monthly limit is reached: new runs are refused until {until} (UTC)");
    }
    println!("by day:");
    for day in v["days"].as_array().into_iter().flatten() {
        println!("  {}  {}", day["key"].as_str().unwrap_or("?"), line(day));
    }
    println!("by session (all time, most spent first):");
    for session in v["sessions"].as_array().into_iter().flatten() {
        println!(
            "  {:<28}  {}",
            session["key"].as_str().unwrap_or("?"),
            line(session)
        );
    }
    let listed = v["sessions"].as_array().map_or(0, Vec::len) as u64;
    let total = v["session_count"].as_u64().unwrap_or(0);
    if total > listed {
        println!("  … and {} more", total - listed);
    }
    if month["estimated_calls"].as_u64().unwrap_or(0) > 0 {
        println!(
            "{} call(s) this month had no usage from the server; their tokens were estimated",
            month["estimated_calls"]
        );
    }
}

fn exit_for(status: RunStatus) -> u8 {
    if status == RunStatus::Completed {
        0
    } else {
        EXIT_RUN_FAILED
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

/// A run hosted by the daemon.
struct Remote {
    json: bool,
    workspace: PathBuf,
    session: Option<String>,
    resume: Option<String>,
    prompt: String,
    goal: Option<ryvos::Goal>,
    director: bool,
    /// The daemon's socket, to answer approval requests on.
    socket: PathBuf,
}

async fn run_remote(mut client: Client, run: Remote) -> u8 {
    let Remote {
        json: json_out,
        workspace,
        session,
        resume,
        prompt,
        goal,
        director,
        socket,
    } = run;
    let inline = inline_approval::wanted(json_out);
    let cwd = std::env::current_dir().ok();
    let params = json!({"prompt": prompt, "workspace": workspace, "cwd": cwd,
                        "session": session, "resume": resume, "goal": goal,
                        "director": director});
    let mut renderer = Renderer::new(json_out);
    let mut session_seen: Option<String> = None;
    if let Err(e) = client.send("run", params).await {
        eprintln!("ryvos: {e}");
        return EXIT_DAEMON;
    }
    loop {
        match renderer.wait(client.next()).await {
            Ok(Reply::Event { event, .. }) => {
                session_seen.get_or_insert_with(|| event.session_id.to_string());
                renderer.show(&event);
                if let (true, EventKind::ApprovalRequested { request_id, .. }) =
                    (inline, &event.kind)
                {
                    inline_approval::answer_remote(socket.clone(), request_id.clone());
                }
            }
            Ok(Reply::Result { result, .. }) => {
                let status: RunStatus =
                    serde_json::from_value(result["status"].clone()).unwrap_or(RunStatus::Failed);
                renderer.finish(
                    status,
                    result["reason"].as_str(),
                    result["session_id"].as_str().unwrap_or("?"),
                );
                return exit_for(status);
            }
            Ok(Reply::Error { error, .. }) => {
                eprintln!("ryvos: {}", error.message);
                return EXIT_RUN_FAILED;
            }
            Err(e) => {
                let resume = session_seen
                    .map(|s| format!("; its completed turns are stored: `ryvos run --resume {s} ...` continues it"))
                    .unwrap_or_default();
                eprintln!("ryvos: lost ryvosd mid-run ({e}){resume}");
                return EXIT_DAEMON;
            }
        }
    }
}

/// A run hosted in this process.
struct Local {
    json: bool,
    workspace: PathBuf,
    session: Option<String>,
    record: Option<PathBuf>,
    prompt: String,
    goal: Option<ryvos::Goal>,
    director: bool,
}

async fn run_local(config: Config, local: Local) -> u8 {
    let Local {
        json: json_out,
        workspace,
        session,
        record,
        prompt,
        goal,
        director,
    } = local;
    let mut builder = Runtime::builder(config.clone());
    if let Some(path) = &record {
        let recorder = ryvos::engine::provider::from_config(&config.model).and_then(|inner| {
            ryvos::engine::provider::recording::RecordingProvider::create(inner, path)
        });
        match recorder {
            Ok(r) => builder = builder.provider(std::sync::Arc::new(r)),
            Err(e) => {
                eprintln!("ryvos: {e}");
                return EXIT_USAGE;
            }
        }
        eprintln!("ryvos: recording the model traffic to {}", path.display());
    }
    let runtime = match builder.start().await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ryvos: {e}");
            return EXIT_RUN_FAILED;
        }
    };
    let mut request = RunRequest::new(prompt).workspace(workspace);
    if let Ok(cwd) = std::env::current_dir() {
        request = request.caller_dir(cwd);
    }
    if let Some(s) = session {
        request = request.session(SessionId::new(s));
    }
    if let Some(goal) = goal {
        request = request.goal(goal);
    }
    if director {
        request = request.director();
    }
    let mut renderer = Renderer::new(json_out);
    let code = match runtime.run(request).await {
        Ok(mut handle) => {
            let mut code = EXIT_RUN_FAILED;
            let inline = inline_approval::wanted(json_out);
            while let Some(event) = renderer.wait(handle.next_event()).await {
                renderer.show(&event);
                if let EventKind::ApprovalRequested { request_id, .. } = &event.kind {
                    if inline {
                        inline_approval::answer_local(runtime.approvals(), request_id.clone());
                    } else {
                        // In-process, no other terminal can reach this run.
                        eprintln!(
                            "ryvos: this run is hosted in-process and not at a terminal: nobody \
                             can answer {request_id}; it is denied after approval_timeout_secs \
                             ({}s). Run ryvosd to answer from another terminal.",
                            config.security.approval_timeout_secs
                        );
                    }
                }
                if let Some(o) = ryvos::RunOutcome::from_event(&event) {
                    renderer.finish(o.status, o.reason.as_deref(), o.session_id.as_str());
                    code = exit_for(o.status);
                }
            }
            code
        }
        Err(e) => {
            eprintln!("ryvos: {e}");
            EXIT_RUN_FAILED
        }
    };
    if let Err(e) = runtime.close().await {
        eprintln!("ryvos: stopping the runtime: {e}");
        return EXIT_RUN_FAILED;
    }
    code
}
