//! Where a chat's runs run: ryvosd when one answers as the chat starts, else a runtime in this
//! process, kept for all the chat's runs (started once, closed when the chat ends).

use crate::ctrl_c::CtrlC;
use crate::exit::{EXIT_DAEMON, EXIT_RUN_FAILED};
use crate::following::{Followed, Following};
use crate::running::{local_run, remote_run, start_local, Remote};
use ryvos::config::Config;
use ryvos::protocol::{
    Call, CompactUndo, CompactUndoResult, History, HistoryResult, RunParams, SessionParams,
};
use ryvos::{Runtime, SessionId};
use ryvos_client::{Client, ClientError};
use std::path::PathBuf;

/// Who runs the chat's runs.
pub enum Host {
    Daemon { socket: PathBuf },
    Here { runtime: Box<Runtime> },
}

impl Host {
    /// The daemon at `socket` if one answers, else a runtime started here; the exit code when
    /// neither can be had.
    pub async fn start(config: &Config, socket: PathBuf) -> Result<Self, u8> {
        match Client::connect(&socket).await {
            Ok(_) => Ok(Self::Daemon { socket }),
            Err(ClientError::NoDaemon { .. }) => {
                let runtime = start_local(config, None).await?;
                Ok(Self::Here {
                    runtime: Box::new(runtime),
                })
            }
            Err(e) => {
                eprintln!("ryvos: {e}");
                Err(EXIT_DAEMON)
            }
        }
    }

    /// Where the runs run, as the greeting says it.
    pub fn describe(&self) -> String {
        match self {
            Self::Daemon { socket } => format!("through ryvosd ({})", socket.display()),
            Self::Here { .. } => "in this process (no ryvosd answers)".to_owned(),
        }
    }

    /// Runs `params` and follows the run to its end.
    pub async fn run(
        &self,
        params: RunParams,
        following: &Following,
        ctrl_c: &mut CtrlC,
    ) -> Followed {
        match self {
            Self::Daemon { socket } => match Client::connect(socket).await {
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
            Self::Here { runtime } => local_run(runtime, params, following, ctrl_c).await,
        }
    }

    /// `session`'s history.
    pub async fn history(&self, session: &str) -> Result<HistoryResult, String> {
        let params = SessionParams {
            session: session.to_owned(),
        };
        match self {
            Self::Daemon { socket } => ask::<History>(socket, &params).await,
            Self::Here { runtime } => match runtime.history(&SessionId::new(session)).await {
                Ok(Some(history)) => Ok(history),
                Ok(None) => Err(format!("there is no session {session}")),
                Err(e) => Err(e.to_string()),
            },
        }
    }

    /// Sets `session`'s window back to before its last compaction.
    pub async fn undo_compaction(&self, session: &str) -> Result<CompactUndoResult, String> {
        let params = SessionParams {
            session: session.to_owned(),
        };
        match self {
            Self::Daemon { socket } => ask::<CompactUndo>(socket, &params).await,
            Self::Here { runtime } => {
                (runtime.undo_compaction(&SessionId::new(session)).await).map_err(|e| e.to_string())
            }
        }
    }

    /// Ends the chat's hold on its host: a runtime here is closed, its last turns stored.
    pub async fn close(self) -> u8 {
        let Self::Here { runtime } = self else {
            return 0;
        };
        match (*runtime).close().await {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("ryvos: stopping the runtime: {e}");
                EXIT_RUN_FAILED
            }
        }
    }
}

/// One call to the daemon at `socket`.
async fn ask<C: Call>(socket: &std::path::Path, params: &C::Params) -> Result<C::Result, String> {
    let mut client = Client::connect(socket).await.map_err(|e| e.to_string())?;
    match client.call::<C>(params).await {
        Ok(Ok(result)) => Ok(result),
        Ok(Err(error)) => Err(error.message),
        Err(e) => Err(e.to_string()),
    }
}
