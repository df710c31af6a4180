//! A prompt turn: the editor's prompt becomes a Ryvos run on the session (on the daemon when
//! one answers), its events are told as updates while it runs, the calls waiting for approval
//! are asked as permission requests, and its end becomes the turn's stop reason.

use super::sessions::{internal, State};
use super::updates::{agent_text, stop_reason, Told};
use crate::host::Fed;
use agent_client_protocol::v1::schema::{
    ContentBlock, EmbeddedResourceResource, PermissionOption, PermissionOptionKind, PromptRequest,
    PromptResponse, RequestPermissionOutcome, RequestPermissionRequest, SessionNotification,
    SessionUpdate, StopReason, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
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
    let session = request.session_id.clone();
    let open = state.opened(&session)?;
    let text = prompt_text(&request.prompt);
    if text.trim().is_empty() {
        return Err(Error::invalid_params().data("the prompt is empty: say what to do"));
    }
    let cancelled = state.begin_turn(&session)?;
    let workspace = open.workspace.display().to_string();
    let params = RunParams {
        cwd: Some(workspace.clone()),
        ..RunParams::new(text, workspace)
    };
    let turn = Turn {
        state,
        cx,
        session: &request.session_id,
        cancelled,
    };
    let ended = turn.run(params, &open.workspace).await;
    state.end_turn(&session);
    ended
}

/// One prompt turn in flight.
struct Turn<'a> {
    state: &'a Arc<State>,
    cx: &'a ConnectionTo<Client>,
    session: &'a agent_client_protocol::v1::schema::SessionId,
    cancelled: watch::Receiver<bool>,
}

impl Turn<'_> {
    /// Starts the run and tells it to the editor until it ends.
    async fn run(
        mut self,
        params: RunParams,
        workspace: &std::path::Path,
    ) -> Result<PromptResponse, Error> {
        let host = &self.state.host;
        let session = SessionId::new(&*self.session.0);
        let mut feed = host.start(params, &session).await.map_err(internal)?;
        let mut told = Told::default();
        let mut cancelling = false;
        loop {
            let fed = tokio::select! {
                fed = feed.next() => fed,
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
            if let EventKind::ApprovalRequested {
                request_id,
                call_id,
                tier,
                ..
            } = &event.kind
            {
                let answer = self.ask(call_id.as_str(), *tier).await?;
                if let Err(e) = host.answer(request_id, answer, BY).await {
                    // Answered meanwhile (the run ended, or someone else answered).
                    eprintln!("ryvos acp: answering approval {request_id}: {e}");
                }
            }
        }
    }

    /// Asks the editor whether the call `call_id` (of `tier`) may run; its answer, a denial
    /// when the turn is cancelled meanwhile.
    async fn ask(&mut self, call_id: &str, tier: SafetyTier) -> Result<Answer, Error> {
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
        let asking = self.cx.send_request(RequestPermissionRequest::new(
            self.session.clone(),
            call,
            options,
        ));
        let outcome = tokio::select! {
            answered = asking.block_task() => answered?.outcome,
            () = until_cancelled(&mut self.cancelled) => RequestPermissionOutcome::Cancelled,
        };
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
