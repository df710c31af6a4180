//! `ryvos continue RUN` and `ryvos stop RUN`: a parked run goes on (followed as `run` follows
//! a run) or ends, through the daemon when one answers, else in this process.

use crate::exit::{EXIT_DAEMON, EXIT_USAGE};
use crate::following::{follow_remote, Following};
use crate::running::{host_here, start_local};
use ryvos::config::Config;
use ryvos::protocol::{Continue, ContinueParams, RunIdParams, Stop};
use ryvos::{RunHandle, Runtime, RuntimeError};
use ryvos_client::{Client, ClientError};
use ryvos_protocol::ids::RunId;
use std::path::PathBuf;

/// What `continue` and `stop` do to the run.
#[derive(Clone, Copy)]
pub enum Taken {
    /// Go on, the per-run budget raised to this many cents when given.
    Continue { budget_cents: Option<u64> },
    /// End it where it parked.
    Stop,
}

/// How the run's events are shown.
pub struct Shown {
    pub json: bool,
    pub quiet: bool,
}

/// Continues or stops run `run` and follows it to its end; the exit code, as `run`'s.
pub async fn take(run: String, taken: Taken, shown: Shown, config: Config, socket: PathBuf) -> u8 {
    if !RunId::is_well_formed(&run) {
        eprintln!("ryvos: '{run}' is not a run id (r_…): `ryvos sessions` shows each session's latest run");
        return EXIT_USAGE;
    }
    match Client::connect(&socket).await {
        Ok(mut client) => {
            let mut ctrl_c = crate::ctrl_c::CtrlC::listen();
            let sent = match taken {
                Taken::Continue { budget_cents } => {
                    let params = ContinueParams { run, budget_cents };
                    client.send::<Continue>(&params).await
                }
                Taken::Stop => client.send::<Stop>(&RunIdParams { run }).await,
            };
            if let Err(e) = sent {
                eprintln!("ryvos: {e}");
                return EXIT_DAEMON;
            }
            let following = Following::new(&config, (shown.json, shown.quiet), exit(taken));
            (follow_remote(client, &following, socket, &mut ctrl_c).await).code
        }
        Err(ClientError::NoDaemon { .. }) => {
            if !shown.quiet {
                eprintln!(
                    "ryvos: no daemon answering at {}; running in-process",
                    socket.display()
                );
            }
            take_here(RunId::new(run), taken, shown, config).await
        }
        Err(e) => {
            eprintln!("ryvos: {e}");
            EXIT_DAEMON
        }
    }
}

/// [`take`] in this process.
async fn take_here(run: RunId, taken: Taken, shown: Shown, config: Config) -> u8 {
    let runtime = match start_local(&config, None).await {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let mut ctrl_c = crate::ctrl_c::CtrlC::listen();
    // Refused (not parked, unknown) exits 1, as through the daemon.
    let following = Following::new(&config, (shown.json, shown.quiet), exit(taken));
    let started = started(&runtime, &run, taken).await;
    host_here(runtime, started, &following, &mut ctrl_c).await
}

/// How the run's end becomes the exit code: a stop succeeds once its run has ended, whatever
/// status it ended with (`budget_exceeded` where it parked, `cancelled` in flight).
fn exit(taken: Taken) -> crate::exit::ExitFor {
    match taken {
        Taken::Continue { .. } => crate::exit::exit_for,
        Taken::Stop => crate::exit::stopped,
    }
}

async fn started(runtime: &Runtime, run: &RunId, taken: Taken) -> Result<RunHandle, RuntimeError> {
    match taken {
        Taken::Continue { budget_cents } => runtime.continue_run(run, budget_cents).await,
        Taken::Stop => runtime.stop_run(run).await,
    }
}
