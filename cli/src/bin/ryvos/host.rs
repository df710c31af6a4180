//! Who hosts the runs a front door starts (`ryvos mcp-server`, `ryvos acp`, `ryvos chat`): the daemon when
//! one answers, so runs outlive the program that asked for them, else a runtime in this
//! process; and what a door asks of either, asked the same way.

use crate::calling::{called, connect};
use crate::exit::EXIT_RUN_FAILED;
use ryvos::config::Config;
use ryvos::protocol::records::SessionRecord;
use ryvos::protocol::{
    Approvals, Cancel, CompactUndo, CompactUndoResult, ErrorCode, FileAnswer, FileAnswerParams,
    Fork, ForkParams, ForkResult, History, HistoryResult, NoParams, Reply, Run, RunParams,
    SessionParams, Sessions,
};
use ryvos::{
    Answer, Event, PendingApproval, RunHandle, RunOutcome, RunRequest, Runtime, SessionId,
};
use ryvos_client::{Client, ClientError};
use std::path::PathBuf;
use std::sync::Arc;

/// Who hosts the runs.
pub enum Host {
    Daemon(PathBuf),
    Here(Box<Runtime>),
}

impl Host {
    /// The daemon at `socket` when it answers, else a runtime started here on `config`; the
    /// exit code when neither can host. `door` names the caller on stderr.
    pub async fn find(config: Config, socket: PathBuf, door: &str) -> Result<Host, u8> {
        match Client::connect(&socket).await {
            Ok(_) => Ok(Host::Daemon(socket)),
            Err(ClientError::NoDaemon { .. }) => {
                let runtime = crate::running::start_local(&config, None).await?;
                eprintln!("ryvos {door}: no daemon answering; hosting runs in-process");
                Ok(Host::Here(Box::new(runtime)))
            }
            Err(e) => {
                eprintln!("ryvos: {e}");
                Err(EXIT_RUN_FAILED)
            }
        }
    }

    /// Starts the run `params` ask for on `session` (which it creates if new); its events
    /// and its end, as they come.
    pub async fn start(&self, params: RunParams, session: &SessionId) -> Result<Feed, String> {
        match self {
            Host::Daemon(socket) => {
                let params = RunParams {
                    session: Some(session.to_string()),
                    ..params
                };
                let mut client = connect(socket).await?;
                client
                    .send::<Run>(&params)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(Feed::Daemon(client))
            }
            Host::Here(runtime) => {
                let request = RunRequest::from_params(&params).session(session.clone());
                let handle = runtime.run(request).await.map_err(|e| e.to_string())?;
                Ok(Feed::Here {
                    handle,
                    outcome: None,
                })
            }
        }
    }

    /// Stops `session`'s run in flight for good; whether one was.
    pub async fn cancel(&self, session: &SessionId) -> Result<bool, String> {
        match self {
            Host::Daemon(socket) => {
                let params = SessionParams {
                    session: session.to_string(),
                };
                Ok(called::<Cancel>(socket, &params).await?.cancelled)
            }
            Host::Here(runtime) => runtime.cancel(session).await.map_err(|e| e.to_string()),
        }
    }

    /// Answers approval request `request_id` as `answer` says, on behalf of `by`.
    pub async fn answer(&self, request_id: &str, answer: Answer, by: &str) -> Result<(), String> {
        match self {
            Host::Daemon(socket) => crate::calling::answer(socket, request_id, answer, by).await,
            Host::Here(runtime) => {
                let answer = Answer {
                    by: by.to_owned(),
                    ..answer
                };
                runtime
                    .answer(request_id, answer)
                    .await
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// Answers file request `request_id` of a run started with `editor_files`: the text read
    /// (`None` for a write done), or why the editor could not.
    pub async fn answer_file(
        &self,
        request_id: &str,
        answer: Result<Option<String>, String>,
    ) -> Result<(), String> {
        match self {
            Host::Daemon(socket) => {
                let (content, error) = match answer {
                    Ok(content) => (content, None),
                    Err(error) => (None, Some(error)),
                };
                let params = FileAnswerParams {
                    request_id: request_id.to_owned(),
                    content,
                    error,
                };
                called::<FileAnswer>(socket, &params).await.map(drop)
            }
            Host::Here(runtime) => match runtime.answer_file(request_id, answer) {
                true => Ok(()),
                false => Err(format!("no file request {request_id} is waiting")),
            },
        }
    }

    /// The calls of `session` waiting for a person's approval, oldest first: those of its run
    /// in flight, and those a run that stopped (a daemon killed meanwhile) left for the next.
    pub async fn pending(&self, session: &SessionId) -> Result<Vec<PendingApproval>, String> {
        let pending = match self {
            Host::Daemon(socket) => called::<Approvals>(socket, &NoParams {}).await?,
            Host::Here(runtime) => runtime.pending_approvals(),
        };
        Ok(pending
            .into_iter()
            .filter(|p| p.session_id == *session)
            .collect())
    }

    /// Every session, most recently updated first.
    pub async fn sessions(&self) -> Result<Vec<SessionRecord>, String> {
        match self {
            Host::Daemon(socket) => called::<Sessions>(socket, &NoParams {}).await,
            Host::Here(runtime) => runtime.sessions().await.map_err(|e| e.to_string()),
        }
    }

    /// Everything stored about `session`; `None` when there is no such session.
    pub async fn history(&self, session: &SessionId) -> Result<Option<HistoryResult>, String> {
        match self {
            Host::Daemon(socket) => {
                let params = SessionParams {
                    session: session.to_string(),
                };
                match connect(socket).await?.call::<History>(&params).await {
                    Ok(Ok(history)) => Ok(Some(history)),
                    Ok(Err(error)) if error.code == ErrorCode::NotFound => Ok(None),
                    Ok(Err(error)) => Err(error.message),
                    Err(e) => Err(e.to_string()),
                }
            }
            Host::Here(runtime) => runtime.history(session).await.map_err(|e| e.to_string()),
        }
    }

    /// A new session from `params`' point of a session (see the socket's `fork`).
    pub async fn fork(&self, params: ForkParams) -> Result<ForkResult, String> {
        match self {
            Host::Daemon(socket) => called::<Fork>(socket, &params).await,
            Host::Here(runtime) => runtime.fork(params).await.map_err(|e| e.to_string()),
        }
    }

    /// Sets `session`'s window back to before its last compaction.
    pub async fn undo_compaction(&self, session: &SessionId) -> Result<CompactUndoResult, String> {
        match self {
            Host::Daemon(socket) => {
                let params = SessionParams {
                    session: session.to_string(),
                };
                called::<CompactUndo>(socket, &params).await
            }
            Host::Here(runtime) => {
                (runtime.undo_compaction(session).await).map_err(|e| e.to_string())
            }
        }
    }

    /// Stops the runtime hosted here, if any, once the door is closed.
    pub async fn close(&self) -> Result<(), String> {
        match self {
            Host::Daemon(_) => Ok(()),
            Host::Here(runtime) => runtime.shutdown().await.map_err(|e| e.to_string()),
        }
    }
}

/// A run's events as they come, then its end.
pub enum Feed {
    Daemon(Client),
    Here {
        handle: RunHandle,
        /// Its end, once its last event has passed.
        outcome: Option<RunOutcome>,
    },
}

/// What a [`Feed`] gives next.
pub enum Fed {
    Event(Arc<Event>),
    /// How the run ended, or why that cannot be known.
    End(Result<RunOutcome, String>),
}

impl Feed {
    /// The run's next event, or its end (given once; after it, the end as lost).
    pub async fn next(&mut self) -> Fed {
        match self {
            Feed::Daemon(client) => match client.next().await {
                Ok(Reply::Event { event, .. }) => Fed::Event(Arc::new(event)),
                Ok(Reply::Result { result, .. }) => {
                    Fed::End(Client::read::<Run>(result).map_err(|e| e.to_string()))
                }
                Ok(Reply::Error { error, .. }) => Fed::End(Err(error.message)),
                Err(e) => Fed::End(Err(format!("{e}; is ryvosd still running?"))),
            },
            Feed::Here { handle, outcome } => {
                if outcome.is_none() {
                    if let Some(event) = handle.next_event().await {
                        *outcome = RunOutcome::from_event(&event);
                        return Fed::Event(event);
                    }
                }
                Fed::End(
                    outcome
                        .take()
                        .ok_or_else(|| "the run's end was lost".to_owned()),
                )
            }
        }
    }
}
