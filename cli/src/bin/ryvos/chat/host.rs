//! A chat's runs on the host it found as it started ([`crate::host::Host`]): each followed
//! as `ryvos run` follows one, through the daemon or in this process.

use crate::ctrl_c::CtrlC;
use crate::exit::EXIT_DAEMON;
use crate::following::{Followed, Following};
use crate::host::Host;
use crate::running::{local_run, remote_run, Remote};
use ryvos::protocol::RunParams;

/// Where the runs run, as the greeting says it.
pub fn described(host: &Host) -> String {
    match host {
        Host::Daemon(socket) => format!("through ryvosd ({})", socket.display()),
        Host::Here(_) => "in this process".to_owned(),
    }
}

/// Runs `params` on `host` and follows the run to its end.
pub async fn run(
    host: &Host,
    params: RunParams,
    following: &Following,
    ctrl_c: &mut CtrlC,
) -> Followed {
    match host {
        Host::Daemon(socket) => match crate::calling::connect(socket).await {
            Ok(client) => {
                let run = Remote {
                    following: following.clone(),
                    socket: socket.clone(),
                    params,
                };
                remote_run(client, run, ctrl_c).await
            }
            Err(e) => {
                eprintln!("ryvos: {e}");
                Followed {
                    code: EXIT_DAEMON,
                    session: None,
                }
            }
        },
        Host::Here(runtime) => local_run(runtime, params, following, ctrl_c).await,
    }
}
