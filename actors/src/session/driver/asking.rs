//! Asking the model for a turn and taking its answer: the request built (the Guardian's
//! hints, the guardrails), the answer streamed (a silent call reported to the Guardian, a call
//! lost with its actor asked again), every attempt billed, and the answer appended.

use super::spending::Bill;
use super::waiting::OnInterrupt;
use super::{Driver, Step};
use crate::event::{CallPurpose, EventKind, StallPhase};
use crate::llm_stream::{ModelAnswer, ModelReply, Purpose, StreamJob};

/// What a turn's model call is called when it is lost.
const MODEL_CALL: &str = "the model call";
use crate::message::{Message, ToolCall};
use crate::provider::{ChatRequest, FinishReason, ProviderError};

impl Driver {
    /// Asks the model for the turn's answer, billed; `None` when the call is to be made again
    /// (it stalled and was cut, it was lost with its actor, or the context had to be made
    /// smaller for it).
    ///
    /// The turn's boundary was set when the last one closed (or the prompt was stored): what was
    /// added since (the Judge's note, a memory flush) goes with this turn, and a call made again
    /// stays in the turn its predecessor began.
    pub(super) async fn ask_model(&mut self) -> Step<Option<ModelReply>> {
        let request = self.request()?;
        let counted_input = self.counted_request_tokens();
        let counted = self.is_counted().then(|| self.raw_request_tokens());
        let run = &mut self.run;
        run.call_mut().asked(counted, self.session.history.mark());
        let (cancel, heartbeat) = run.start_call();
        let answer = self
            .session
            .services
            .llm
            .stream(MODEL_CALL, |on_done| StreamJob {
                models: run.call().models().clone(),
                request,
                events: run.events().clone(),
                purpose: Purpose::Turn,
                counted_input,
                encoded: run.call().encoded(),
                cancel,
                heartbeat,
                on_done,
            });
        let watched = self.watched(
            answer,
            StallPhase::Model,
            Vec::new(),
            OnInterrupt::AfterStep,
        );
        let Some(answer) = watched.await? else {
            return self.cut_stalled_call().await;
        };
        let answer = answer.unwrap_or_else(|| ModelAnswer::lost(MODEL_CALL));
        if answer.lost && self.run.call().losses() < self.session.services.model_retries {
            return Ok(self.ask_again_after_loss());
        }
        // Every attempt the server may have billed is recorded before the answer is used.
        let turn = self.run.turns() + 1;
        // Counted only when there is a cut call to bill: counting is not free.
        let cut_input = match answer.cut_calls.is_empty() {
            true => 0,
            false => self.request_tokens(),
        };
        let mut bills = Bill::cut_calls(turn, &answer.cut_calls, cut_input);
        if let Ok(reply) = &answer.result {
            let expected =
                (self.run.call().counted()).map(|counted| (counted, self.as_served(counted)));
            bills.push(Bill::of(turn, reply).expecting(expected));
        }
        self.bill(CallPurpose::Turn, bills).await?;
        match answer.result {
            Ok(reply) => Ok(Some(reply)),
            Err(ProviderError::ContextOverflow(overflow)) => {
                self.make_room_for_overflow(overflow).await?;
                Ok(None)
            }
            Err(e) => Err(self.failure(format!("the model call failed: {e}"))),
        }
    }

    /// The request for the turn: the conversation with the Guardian's hints added, as the
    /// guardrails let it go.
    fn request(&mut self) -> Step<ChatRequest> {
        for hint in self.run.oversight_mut().take_hints() {
            self.run.events().emit(EventKind::GuardianHint {
                message: hint.message.clone(),
                level: hint.level,
            });
            let hint = Message::System {
                content: hint.message,
            };
            self.session.history.push(hint);
        }
        let request = ChatRequest {
            system: self.run.system().text().clone(),
            messages: self.session.history.snapshot(),
            tools: self.run.tools().specs(),
        };
        self.guard_request(request)
    }

    /// The Guardian had the silent call cut: it was paid for (its input at least, counted),
    /// and it is made again.
    async fn cut_stalled_call(&mut self) -> Step<Option<ModelReply>> {
        self.run.call().cut();
        let input_tokens = self.request_tokens();
        let usage = crate::provider::Usage {
            input_tokens,
            output_tokens: 0,
        };
        let model = self.run.call().model().to_owned();
        let bill = Bill::estimated(self.run.turns() + 1, &model, usage);
        self.bill(CallPurpose::Turn, vec![bill]).await?;
        Ok(None)
    }

    /// The model actor failed with the call in its mailbox: nothing was asked or billed, so it
    /// is asked again of its next incarnation, as a cut stream would be, within the model's
    /// retries.
    fn ask_again_after_loss(&mut self) -> Option<ModelReply> {
        let lost = self.run.call_mut().lost();
        let model = self.run.call().model().to_owned();
        tracing::warn!(session = %self.session.id, "a model call was lost with its actor; asking again");
        self.run.events().emit(EventKind::ModelRetry {
            message: format!(
                "{model} was not asked (the model stream actor failed with the call); asking \
                 again once it is back"
            ),
            model,
            attempt: lost + 1,
            wait_ms: 0,
            discarded_text: false,
        });
        None
    }

    /// Takes the model's answer into the conversation (once the guardrails let it in); its
    /// text and the calls it asks for.
    pub(super) fn take_answer(&mut self, reply: ModelReply) -> Step<(String, Vec<ToolCall>)> {
        let run = &mut self.run;
        run.call_mut().answered();
        run.count_turn();
        run.turn_mut().answered(reply.usage);
        if !reply.usage_estimated {
            let system = self.system_tokens();
            let asked_with = self.run.call().asked_with();
            let history = &mut self.session.history;
            history.measure(asked_with, reply.usage.input_tokens, system);
            self.learn_count(reply.usage.input_tokens);
        }
        self.guard_answer(&reply.response)?;
        let run = &mut self.run;
        let text = reply.response.text;
        let calls = reply.response.tool_calls;
        let reasoning = reply.response.reasoning;
        run.turn_mut()
            .cut_at_output_limit(reply.response.finish == Some(FinishReason::Length));
        if run.turn().answer_cut() {
            run.events().emit(truncation_event(&reply.model, &calls));
        }
        run.note_text(&text);
        let answer = Message::Assistant {
            content: text.clone(),
            tool_calls: calls.clone(),
            reasoning,
        };
        run.observe(&answer);
        self.session.history.push(answer);
        Ok((text, calls))
    }

    /// The model answered without calls: the run completes, or (goal-driven) the Judge says
    /// whether it does.
    pub(super) async fn final_answer(&mut self, text: String) -> Step<()> {
        let stop = crate::hooks::stop_event(self.run.is_directed());
        if self.run.hooks().any(stop) {
            // The answer is stored before the hooks look at it.
            self.close_turn(Vec::new(), None);
            if self.sent_back_by_hooks(&text).await? {
                return Ok(());
            }
        }
        if self.run.goal().is_some() {
            return self.judge(text, false).await;
        }
        Err(super::Ending::completed(text))
    }
}

/// The event of an answer that stopped at the output limit, naming the calls it cut off.
fn truncation_event(model: &str, calls: &[ToolCall]) -> EventKind {
    let cut_calls: Vec<_> = calls
        .iter()
        .filter(|c| !crate::provider::replay::is_object(&c.arguments))
        .map(|c| c.id.clone())
        .collect();
    let message = if !cut_calls.is_empty() {
        format!(
            "{model} stopped at its output limit (max_output_tokens) in the middle of a tool \
             call: {} call(s) cut off will not run, and the model is told to make them smaller",
            cut_calls.len()
        )
    } else if calls.is_empty() {
        format!("{model} stopped at its output limit (max_output_tokens): the answer is incomplete")
    } else {
        format!("{model} stopped at its output limit (max_output_tokens) after its tool calls")
    };
    EventKind::OutputTruncated {
        message,
        model: model.to_owned(),
        cut_calls,
    }
}
