//! The run queue from the command line: `submit` a run for whichever daemon has room, list
//! the `runs` of the cluster, `wait` for one's end, `follow` its progress.

use crate::cli::RunArgs;
use crate::exit::{exit_for, EXIT_DAEMON, EXIT_RUN_FAILED, EXIT_USAGE};
use crate::out::outln;
use crate::reading::{self, shown};
use crate::render::Renderer;
use crate::starting::{asked, Given};
use ryvos::config::Config;
use ryvos::protocol::{Follow, QueuedRunParams, Reply, Runs, RunsParams, Submit, Wait};
use ryvos::{EventKind, RunStatus};
use ryvos_client::{Client, ClientError};
use ryvos_protocol::event::RunOutcome;
use ryvos_protocol::records::{QueueState, QueuedRun};
use std::path::Path;

/// Connects to the daemon; the queue lives in the store daemons share, reached through one.
async fn daemon(socket: &Path) -> Result<Client, u8> {
    match Client::connect(socket).await {
        Ok(client) => Ok(client),
        Err(ClientError::NoDaemon { .. }) => {
            eprintln!(
                "ryvos: no daemon answering at {}; the run queue is served by ryvosd (on a \
                 store daemons share: [store] backend = \"postgres\")",
                socket.display()
            );
            Err(EXIT_DAEMON)
        }
        Err(e) => {
            eprintln!("ryvos: {e}");
            Err(EXIT_DAEMON)
        }
    }
}

/// `ryvos submit`: queues the run and prints its id.
pub async fn submit(mut args: RunArgs, given: Given, config: &Config, socket: &Path) -> u8 {
    // Whichever daemon claims the run hosts it on its own config, with these over it.
    let settings = match crate::run_settings::for_the_daemon(config, &given.settings) {
        Ok(settings) => settings,
        Err(why) => {
            eprintln!("ryvos: {why}");
            return EXIT_USAGE;
        }
    };
    let asked = match asked(&mut args) {
        Ok(asked) => asked,
        Err(e) => {
            eprintln!("ryvos: {e}");
            return EXIT_USAGE;
        }
    };
    let params = asked.into_params(args.run.session, args.run.director, settings);
    let mut client = match daemon(socket).await {
        Ok(client) => client,
        Err(code) => return code,
    };
    let print = |run: &QueuedRun| {
        if args.json {
            shown(true, |_: &QueuedRun| {})(run);
        } else if args.quiet {
            outln!("{}", run.id);
        } else {
            outln!("{}", run.id);
            eprintln!(
                "ryvos: queued in session {}; `ryvos wait {}` waits for its end",
                run.session_id, run.id
            );
        }
    };
    reading::call::<Submit>(&mut client, &params, print).await
}

/// `ryvos runs`: the cluster's queued, running and finished runs.
pub async fn runs(state: Option<QueueState>, limit: Option<u32>, json: bool, socket: &Path) -> u8 {
    let mut client = match daemon(socket).await {
        Ok(client) => client,
        Err(code) => return code,
    };
    let params = RunsParams { state, limit };
    reading::call::<Runs>(&mut client, &params, shown(json, print_runs)).await
}

fn print_runs(runs: &Vec<QueuedRun>) {
    if runs.is_empty() {
        outln!("no runs in the queue");
        return;
    }
    for run in runs {
        let status = match &run.outcome {
            Some(o) => o.status.to_string(),
            None => "-".to_owned(),
        };
        let prompt = crate::render::clip(&run.params.prompt, 40);
        outln!(
            "{}  {:<8}  {:<10}  {}  {}  attempts {}  {}",
            run.id,
            run.state.as_str(),
            status,
            run.session_id,
            run.owner.as_deref().unwrap_or("-"),
            run.attempts,
            prompt.replace('\n', " ")
        );
    }
}

/// `ryvos wait RUN`: waits for the run's end, prints its answer; exits as `run` would.
pub async fn wait(run: String, json: bool, socket: &Path) -> u8 {
    let mut client = match daemon(socket).await {
        Ok(client) => client,
        Err(code) => return code,
    };
    if let Err(e) = client.send::<Wait>(&QueuedRunParams { run }).await {
        eprintln!("ryvos: {e}");
        return EXIT_DAEMON;
    }
    loop {
        match client.next().await {
            // The only event `wait` sends: the run parked, and is waited through.
            Ok(Reply::Event { event, .. }) => {
                if let EventKind::RunParked { reason, message } = &event.kind {
                    eprintln!(
                        "ryvos: run {} parked ({reason}): {message}; waiting until it goes on",
                        event.run_id
                    );
                }
            }
            Ok(Reply::Result { result, .. }) => {
                return match Client::read::<Wait>(result) {
                    Ok(outcome) => ended(&outcome, json),
                    Err(e) => {
                        eprintln!("ryvos: {e}");
                        EXIT_DAEMON
                    }
                };
            }
            Ok(Reply::Error { error, .. }) => {
                eprintln!("ryvos: {}", error.message);
                return EXIT_RUN_FAILED;
            }
            Err(e) => {
                eprintln!("ryvos: lost ryvosd while waiting ({e}); `ryvos wait` again goes on");
                return EXIT_DAEMON;
            }
        }
    }
}

/// Prints how a run ended; the exit code `run` would have.
fn ended(outcome: &RunOutcome, json: bool) -> u8 {
    if json {
        shown(true, |_: &RunOutcome| {})(outcome);
    } else {
        if !outcome.output.is_empty() {
            outln!("{}", outcome.output);
        }
        if outcome.status != RunStatus::Completed {
            let why = outcome.reason.as_deref().unwrap_or("no reason given");
            eprintln!("ryvos: the run ended {}: {why}", outcome.status);
        }
    }
    exit_for(outcome.status)
}

/// `ryvos follow RUN`: the run's progress as it goes, then its end.
pub async fn follow(run: String, json: bool, socket: &Path) -> u8 {
    let mut client = match daemon(socket).await {
        Ok(client) => client,
        Err(code) => return code,
    };
    if let Err(e) = client.send::<Follow>(&QueuedRunParams { run }).await {
        eprintln!("ryvos: {e}");
        return EXIT_DAEMON;
    }
    let mut renderer = Renderer::new(json);
    loop {
        match client.next().await {
            Ok(Reply::Event { event, .. }) => renderer.show(&event),
            Ok(Reply::Result { result, .. }) => {
                return crate::following::ended_remote(result, &mut renderer, false, exit_for);
            }
            Ok(Reply::Error { error, .. }) => {
                eprintln!("ryvos: {}", error.message);
                return EXIT_RUN_FAILED;
            }
            Err(e) => {
                eprintln!("ryvos: lost ryvosd while following ({e}); `ryvos follow` again goes on");
                return EXIT_DAEMON;
            }
        }
    }
}
