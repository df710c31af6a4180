//! A prompt turn: the editor's prompt becomes a Ryvos run on the session (on the daemon when
//! one answers), its events are told as updates while it runs, the calls waiting for approval
//! are asked as permission requests, and its end becomes the turn's stop reason.

use super::sessions::{internal, State};
use super::updates::{agent_text, stop_reason, Told};
use crate::host::Fed;
use agent_client_protocol::v1::schema::{
    ContentBlock, EmbeddedResourceResource, PermissionOption, PermissionOptionKind, PromptRequest,
    PromptResponse, RequestPermissionOutcome, RequestPermissionRequest, SessionId as AcpSessionId,
    SessionNotification, SessionUpdate, StopReason, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Client, Error};
use ryvos::protocol::RunParams;
use ryvos::{Answer, EventKind, RunStatus, SafetyTier, SessionId};
use std::sync::Arc;
use tokio::sync::watch;

/// Who answers approvals from an editor, as the audit and `ApprovalResolved` name it.
const BY: &str = "the editor (ACP)";
/// The permission options' ids.
const ALLOW_ONCE: &str = "allow-once";
const ALLOW_ALWAYS: &str = "allow-always";
const REJECT_ONCE: &str = "reject-once";

/// Runs `request`'s prompt on its session to the run's end.
pub async fn prompt(
    state: &Arc<State>,
    cx: &ConnectionTo<Client>,
    request: PromptRequest,
) -> Result<PromptResponse, Error> {
    let text = prompt_text(&request.prompt);
    if text.trim().is_empty() {
        return Err(Error::invalid_params().data("the prompt is empty: say what to do"));
    }
    run(state, cx, &request.session_id, text, Told::default()).await
}

/// Goes on with `session`'s run that stopped with calls left (its daemon was killed while one
/// waited for approval): without a prompt, asking again what was asked. The calls `shown` were
/// told already (by the replayed history).
pub async fn go_on(
    state: &Arc<State>,
    cx: &ConnectionTo<Client>,
    session: &AcpSessionId,
    shown: Vec<String>,
) -> Result<PromptResponse, Error> {
    run(state, cx, session, String::new(), Told::knowing(shown)).await
}

/// Runs `text` (none: the session goes on) on `session` to the run's end, `told` what the
/// editor has been told of it.
async fn run(
    state: &Arc<State>,
    cx: &ConnectionTo<Client>,
    session: &AcpSessionId,
    text: String,
    told: Told,
) -> Result<PromptResponse, Error> {
    let open = state.opened(session)?;
    let cancelled = state.begin_turn(session)?;
    let workspace = open.workspace.display().to_string();
    let params = RunParams {
        cwd: Some(workspace.clone()),
        editor_files: state.edits_files(),
        mcp_servers: open.mcp_servers.clone(),
        ..RunParams::new(text, workspace)
    };
    let turn = Turn {
        state,
        cx,
        session,
        cancelled,
    };
    let ended = turn.run(params, &open.workspace, told).await;
    state.end_turn(session);
    ended
}

/// One prompt turn in flight.
struct Turn<'a> {
    state: &'a Arc<State>,
    cx: &'a ConnectionTo<Client>,
    session: &'a AcpSessionId,
    cancelled: watch::Receiver<bool>,
}

impl Turn<'_> {
    /// Starts the run and tells it to the editor until it ends. While a permission is asked,
    /// the run is still followed: an answer given elsewhere (`ryvos approve`, the console)
    /// withdraws the question, and a run that ends (its daemon killed) ends the turn.
    async fn run(
        mut self,
        params: RunParams,
        workspace: &std::path::Path,
        mut told: Told,
    ) -> Result<PromptResponse, Error> {
        let host = &self.state.host;
        let session = SessionId::new(&*self.session.0);
        let mut feed = host.start(params, &session).await.map_err(internal)?;
        let mut cancelling = false;
        let mut asking: Option<Asking> = None;
        loop {
            let fed = tokio::select! {
                fed = feed.next() => fed,
                answered = wait_for(&mut asking), if asking.is_some() => {
                    let (request_id, answer) = answered?;
                    if let Err(e) = host.answer(&request_id, answer, BY).await {
                        // Answered meanwhile (the run ended, or someone else answered).
                        eprintln!("ryvos acp: answering approval {request_id}: {e}");
                    }
                    continue;
                }
                () = until_cancelled(&mut self.cancelled), if !cancelling => {
                    cancelling = true;
                    if let Err(e) = host.cancel(&session).await {
                        eprintln!("ryvos acp: cancelling the run of session {session}: {e}");
                    }
                    continue;
                }
            };
            let event = match fed {
                Fed::Event(event) => event,
                Fed::End(Ok(outcome)) => return Ok(self.ended(outcome.status, outcome.reason)),
                Fed::End(Err(why)) => return Err(internal(why)),
            };
            for update in told.updates(&event.kind, workspace) {
                self.tell(update)?;
            }
            match &event.kind {
                EventKind::ApprovalRequested {
                    request_id,
                    call_id,
                    tier,
                    ..
                } => {
                    let mode = self.state.mode(self.session)?;
                    match mode.allows(*tier) {
                        true => {
                            let allowed = answer(true, false, None);
                            let by = mode.answerer();
                            if let Err(e) = host.answer(request_id, allowed, &by).await {
                                eprintln!("ryvos acp: answering approval {request_id}: {e}");
                            }
                        }
                        false => asking = Some(self.ask(request_id, call_id.as_str(), *tier)),
                    }
                }
                EventKind::FileRequested {
                    request_id,
                    path,
                    content,
                } => {
                    let (state, cx, session) = (self.state, self.cx, self.session);
                    super::files::serve(state, cx, session, request_id, path, content.as_deref())?
                }
                // Dropping the question withdraws it from the editor.
                EventKind::ApprovalResolved { request_id, .. }
                    if asking.as_ref().is_some_and(|a| a.request_id == *request_id) =>
                {
                    asking = None
                }
                _ => {}
            }
        }
    }

    /// Asks the editor whether the call `call_id` (of `tier`), approval request `request_id`,
    /// may run.
    fn ask(&self, request_id: &str, call_id: &str, tier: SafetyTier) -> Asking {
        let mut options = vec![PermissionOption::new(
            ALLOW_ONCE,
            "Allow once",
            PermissionOptionKind::AllowOnce,
        )];
        // The gate never lets a T4 call go unasked.
        if tier != SafetyTier::T4 {
            options.push(PermissionOption::new(
                ALLOW_ALWAYS,
                "Allow always in this session",
                PermissionOptionKind::AllowAlways,
            ));
        }
        options.push(PermissionOption::new(
            REJECT_ONCE,
            "Reject",
            PermissionOptionKind::RejectOnce,
        ));
        let call = ToolCallUpdate::new(
            call_id.to_owned(),
            ToolCallUpdateFields::new().status(ToolCallStatus::Pending),
        );
        let question = RequestPermissionRequest::new(self.session.clone(), call, options);
        let asked = self.cx.send_request(question);
        Asking {
            request_id: request_id.to_owned(),
            answer: Box::pin(async move {
                let outcome = asked.block_task().await?.outcome;
                let chosen = match &outcome {
                    RequestPermissionOutcome::Selected(selected) => Some(&*selected.option_id.0),
                    _ => None,
                };
                Ok(match chosen {
                    Some(ALLOW_ONCE) => answer(true, false, None),
                    Some(ALLOW_ALWAYS) => answer(true, true, None),
                    Some(_) => answer(false, false, Some("rejected in the editor")),
                    None => answer(false, false, Some("the editor cancelled the turn")),
                })
            }),
        }
    }

    /// Sends `update` to the editor.
    fn tell(&self, update: SessionUpdate) -> Result<(), Error> {
        (self.cx).send_notification(SessionNotification::new(self.session.clone(), update))
    }

    /// The turn's answer for a run that ended `status`; a run that did not complete says why
    /// in a last message.
    fn ended(&self, status: RunStatus, why: Option<String>) -> PromptResponse {
        let stop = stop_reason(status);
        if status != RunStatus::Completed && stop != StopReason::Cancelled {
            let line = match why {
                Some(why) => format!("\n\n[ryvos] The run ended {status}: {why}"),
                None => format!("\n\n[ryvos] The run ended {status}."),
            };
            if let Err(e) = self.tell(agent_text(&line)) {
                eprintln!("ryvos acp: telling the editor how the run ended: {e}");
            }
        }
        PromptResponse::new(stop)
    }
}

/// A permission asked of the editor, and the answer it will give.
struct Asking {
    request_id: String,
    answer: std::pin::Pin<Box<dyn std::future::Future<Output = Result<Answer, Error>> + Send>>,
}

/// The answer to the permission being asked, with its request's id (once given; never when
/// nothing is asked).
async fn wait_for(asking: &mut Option<Asking>) -> Result<(String, Answer), Error> {
    let Some(question) = asking.as_mut() else {
        return std::future::pending().await;
    };
    let answer = question.answer.as_mut().await;
    let request_id = question.request_id.clone();
    *asking = None;
    Ok((request_id, answer?))
}

/// Resolves once the editor cancels the turn (never, if it is dropped without cancelling).
async fn until_cancelled(cancelled: &mut watch::Receiver<bool>) {
    if cancelled.wait_for(|c| *c).await.is_err() {
        std::future::pending::<()>().await;
    }
}

fn answer(approved: bool, always: bool, reason: Option<&str>) -> Answer {
    Answer {
        approved,
        always,
        reason: reason.map(str::to_owned),
        by: BY.to_owned(),
    }
}

/// The prompt's text: its text blocks, and the text of the resources the editor embedded
/// (each under its URI).
fn prompt_text(blocks: &[ContentBlock]) -> String {
    let parts: Vec<String> = (blocks.iter())
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.clone()),
            ContentBlock::Resource(embedded) => match &embedded.resource {
                EmbeddedResourceResource::TextResourceContents(file) => {
                    Some(format!("[{}]\n{}", file.uri, file.text))
                }
                _ => None,
            },
            ContentBlock::ResourceLink(link) => Some(format!("[{}]", link.uri)),
            _ => None,
        })
        .collect();
    parts.join("\n\n")
}
