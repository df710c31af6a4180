//! The guardrails around each model call: a tripwire ends the run `blocked`, before the model
//! is called or before its answer enters the history.

use super::{SessionMsg, SessionState};
use crate::event::{EventKind, RunStatus};
use crate::guardrail::{After, Before};
use crate::provider::{AssistantResponse, ChatRequest};
use ractor::ActorRef;

impl SessionState {
    /// `request` as the guardrails let it go (passed or transformed); `None` when one blocked
    /// it, and the run is ending.
    pub(super) fn guard_request(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        mut request: ChatRequest,
    ) -> Option<ChatRequest> {
        let guardrails = self.services.guardrails.clone();
        for guardrail in guardrails.iter() {
            match guardrail.before(&request) {
                Before::Pass => {}
                Before::Transform(changed) => request = changed,
                Before::Block(reason) => {
                    self.trip(myself, guardrail.name(), "before", reason);
                    return None;
                }
            }
        }
        Some(request)
    }

    /// Whether the guardrails let `response` into the history; when one blocks it, the run
    /// is ending.
    pub(super) fn guard_answer(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        response: &AssistantResponse,
    ) -> bool {
        let guardrails = self.services.guardrails.clone();
        for guardrail in guardrails.iter() {
            if let After::Block(reason) = guardrail.after(response) {
                self.trip(myself, guardrail.name(), "after", reason);
                return false;
            }
        }
        true
    }

    fn trip(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        guardrail: &str,
        stage: &str,
        reason: String,
    ) {
        if let Some(run) = &self.run {
            run.events.emit(EventKind::GuardrailTripwire {
                reason: reason.clone(),
                guardrail: guardrail.to_owned(),
                stage: stage.to_owned(),
            });
        }
        self.finish(
            myself,
            RunStatus::Blocked,
            Some(format!(
                "the guardrail {guardrail} blocked the run: {reason}"
            )),
        );
    }
}
