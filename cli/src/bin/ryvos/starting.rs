//! From `ryvos run`'s flags to a run: the prompt (from the arguments or stdin), the workspace,
//! the goal, and who hosts it — the daemon when one answers, else this process.

use crate::cli::RunArgs;
use crate::exit::{exit_for, EXIT_DAEMON, EXIT_USAGE};
use crate::following::Following;
use crate::run_settings;
use crate::running::{run_local, run_remote, Local, Remote};
use crate::workspace_dir::workspace_of;
use ryvos::config::{Config, Override};
use ryvos::protocol::RunParams;
use ryvos::RunSettings;
use ryvos_client::{Client, ClientError};
use std::io::{IsTerminal, Read};
use std::path::PathBuf;

/// What the command line said about the config, besides the subcommand.
pub struct Given {
    /// `--config` was given.
    pub explicit_config: bool,
    /// The config settings given (`-c`, `--model`, `--max-turns`).
    pub settings: Vec<Override>,
}

/// Runs `ryvos run`; its exit code.
pub async fn run(mut args: RunArgs, given: Given, config: Config, socket: PathBuf) -> u8 {
    let Given {
        explicit_config,
        settings,
    } = given;
    let recording = args.record.is_some();
    let asked = match asked(&mut args) {
        Ok(asked) => asked,
        Err(e) => {
            eprintln!("ryvos: {e}");
            return EXIT_USAGE;
        }
    };
    match Client::connect(&socket).await {
        Ok(client) => {
            let settings = match hosted_as_asked(&config, recording, &settings) {
                Ok(settings) => settings,
                Err(why) => {
                    eprintln!("ryvos: {why}");
                    return EXIT_USAGE;
                }
            };
            let mut params = asked.into_params(args.run.session, args.run.director, settings);
            // Absolute as loaded; the daemon resolves symlinks.
            params.config = (config.source.as_ref())
                .filter(|_| explicit_config)
                .map(|c| c.display().to_string());
            let run = Remote {
                following: Following::new(&config, (args.json, args.quiet), exit_for),
                socket,
                params,
            };
            run_remote(client, run).await
        }
        Err(ClientError::NoDaemon { .. }) => {
            if !args.quiet {
                eprintln!(
                    "ryvos: no daemon answering at {}; running in-process",
                    socket.display()
                );
            }
            let settings = run_settings::per_run(&config, &settings);
            let local = Local {
                following: Following::new(&config, (args.json, args.quiet), exit_for),
                record: args.record,
                params: asked.into_params(args.run.session, args.run.director, settings),
            };
            run_local(config, local).await
        }
        Err(e) => {
            eprintln!("ryvos: {e}");
            EXIT_DAEMON
        }
    }
}

/// What the run is to do, as the flags and stdin say.
pub struct Asked {
    pub prompt: String,
    /// `Some("")` for `--continue`: the workspace's latest session.
    pub resume: Option<String>,
    pub goal: Option<ryvos::Goal>,
    /// `--workspace`, or the current directory for a new session; `None` when a session is
    /// continued without one: it works in its own.
    pub workspace: Option<PathBuf>,
}

impl Asked {
    /// The socket's `run` (or `submit`) parameters for this run, on `session` when given, as
    /// a Director when `director`, with the model and limits it sets for itself.
    pub fn into_params(
        self,
        session: Option<String>,
        director: bool,
        settings: RunSettings,
    ) -> RunParams {
        let params = RunParams {
            session,
            resume: self.resume,
            workspace: self.workspace.map(|w| w.display().to_string()),
            cwd: std::env::current_dir()
                .ok()
                .map(|c| c.display().to_string()),
            goal: self.goal,
            director,
            traceparent: caller_trace(),
            ..RunParams::new(self.prompt, "")
        };
        params.with_settings(settings)
    }
}

/// What `args` ask for (taking their prompt, goal and workspace), or why it is bad usage.
pub fn asked(args: &mut RunArgs) -> Result<Asked, String> {
    let continuing = args.run.resume.is_some() || args.continue_latest;
    let prompt = prompt_of(&args.run.prompt, continuing)?;
    let resume = args
        .run
        .resume
        .take()
        .or(args.continue_latest.then(String::new));
    if prompt.trim().is_empty() && resume.is_none() {
        return Err("the prompt is empty: say what the run should do".into());
    }
    if args.run.director && prompt.trim().is_empty() {
        return Err("a Director run needs its task: give a prompt".into());
    }
    let goal = goal_of(args.run.goal.take(), &args.run.criterion, &prompt)?;
    let workspace = match args.run.workspace.take() {
        Some(dir) => Some(workspace_of(Some(dir))?),
        // A session goes on where it worked: its history speaks of the files there.
        None if continuing || args.run.session.is_some() => None,
        None => Some(workspace_of(None)?),
    };
    Ok(Asked {
        prompt,
        resume,
        goal,
        workspace,
    })
}

/// What the daemon answering is to run with of the settings given here; why it cannot host
/// this run as it was asked for, if it cannot (a `--config` it does not run on is refused by
/// the daemon, with the run request).
fn hosted_as_asked(
    config: &Config,
    recording: bool,
    settings: &[Override],
) -> Result<RunSettings, String> {
    if recording {
        return Err(format!(
            "--record runs in-process, but ryvosd holds this RYVOS_HOME ({}); stop it with \
             `ryvos shutdown` or use another RYVOS_HOME",
            config.home.display()
        ));
    }
    run_settings::for_the_daemon(config, settings)
}

/// The prompt: the arguments joined, or stdin when they are `-`, or when there are none, no
/// session is continued and stdin is not a terminal (`echo … | ryvos run`).
fn prompt_of(words: &[String], continuing: bool) -> Result<String, String> {
    let from_stdin = match words {
        [dash] if dash == "-" => true,
        [] => !continuing && !std::io::stdin().is_terminal(),
        _ => false,
    };
    if !from_stdin {
        return Ok(words.join(" "));
    }
    let mut prompt = String::new();
    std::io::stdin()
        .read_to_string(&mut prompt)
        .map_err(|e| format!("cannot read the prompt from stdin: {e}"))?;
    Ok(prompt.trim_end().to_owned())
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

/// The caller's trace context, from `TRACEPARENT` (the OpenTelemetry convention for passing
/// it through the environment): the run's span is then a child of the caller's.
fn caller_trace() -> Option<String> {
    std::env::var("TRACEPARENT")
        .ok()
        .filter(|v| !v.trim().is_empty())
}
