//! The guardrails around each model call: a tripwire ends the run `blocked`, before the model
//! is called or before its answer enters the history.

use super::{Driver, Ending, Step};
use crate::event::{EventKind, RunStatus};
use crate::guardrail::{After, Before};
use crate::provider::{AssistantResponse, ChatRequest};

impl Driver {
    /// `request` as the guardrails let it go (passed or transformed).
    pub(super) fn guard_request(&self, mut request: ChatRequest) -> Step<ChatRequest> {
        for guardrail in self.session.services.guardrails.iter() {
            match guardrail.before(&request) {
                Before::Pass => {}
                Before::Transform(changed) => request = changed,
                Before::Block(reason) => {
                    return Err(self.tripped(guardrail.name(), "before", reason))
                }
            }
        }
        Ok(request)
    }

    /// Whether the guardrails let `response` into the history.
    pub(super) fn guard_answer(&self, response: &AssistantResponse) -> Step<()> {
        for guardrail in self.session.services.guardrails.iter() {
            if let After::Block(reason) = guardrail.after(response) {
                return Err(self.tripped(guardrail.name(), "after", reason));
            }
        }
        Ok(())
    }

    fn tripped(&self, guardrail: &str, stage: &str, reason: String) -> Ending {
        self.run.events().emit(EventKind::GuardrailTripwire {
            reason: reason.clone(),
            guardrail: guardrail.to_owned(),
            stage: stage.to_owned(),
        });
        let reason = format!("the guardrail {guardrail} blocked the run: {reason}");
        self.end(RunStatus::Blocked, reason)
    }
}
