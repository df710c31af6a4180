//! LlmStreamActor: asks the model and streams its answer.
//!
//! Each request runs in its own task: text deltas are published as `TextDelta` events the
//! moment they arrive, tool calls are assembled from their fragments, and the whole answer goes
//! back to the session. A server that reports no usage gets it estimated with the tokenizer, and
//! the estimate is marked as such.

use crate::callback::Callback;
use crate::event::{EventKind, RunEvents};
use crate::provider::{
    AssistantResponse, ChatRequest, Provider, ProviderError, ResponseAssembler, StreamDelta, Usage,
};
use crate::tokens;
use futures_util::StreamExt;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The model's answer to one request.
#[derive(Clone, Debug)]
pub struct ModelReply {
    pub response: AssistantResponse,
    pub usage: Usage,
    /// True when the server sent no usage and it was estimated.
    pub usage_estimated: bool,
    /// The model that answered.
    pub model: String,
}

/// One request to stream.
pub struct StreamJob {
    pub request: ChatRequest,
    pub events: RunEvents,
    pub cancel: CancellationToken,
    /// The request's size in tokens as the session counted it, used when the server reports no
    /// usage.
    pub input_tokens: u64,
    /// Receives the answer (a cancelled job answers with its fallback, which the run ignores).
    pub on_done: Callback<Result<ModelReply, ProviderError>>,
}

/// Messages of the [`LlmStreamActor`].
pub enum LlmMsg {
    Stream(StreamJob),
    /// Test hook: panic inside the handler.
    #[cfg(feature = "fault-injection")]
    Panic,
}

/// The actor; see the module documentation.
pub struct LlmStreamActor;

impl Actor for LlmStreamActor {
    type Msg = LlmMsg;
    type State = Arc<dyn Provider>;
    type Arguments = Arc<dyn Provider>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        provider: Arc<dyn Provider>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(provider)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        provider: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            LlmMsg::Stream(job) => {
                let provider = provider.clone();
                tokio::spawn(async move {
                    let StreamJob {
                        request,
                        events,
                        cancel,
                        input_tokens,
                        on_done,
                    } = job;
                    let result = tokio::select! {
                        result = stream_answer(provider.as_ref(), &request, &events, input_tokens) => Some(result),
                        _ = cancel.cancelled() => None,
                    };
                    // Release the history snapshot before answering, so the session can append
                    // without copying it.
                    drop(request);
                    if let Some(result) = result {
                        on_done.answer(result);
                    }
                });
            }
            #[cfg(feature = "fault-injection")]
            LlmMsg::Panic => panic!("injected fault in the LLM stream actor"),
        }
        Ok(())
    }
}

async fn stream_answer(
    provider: &dyn Provider,
    request: &ChatRequest,
    events: &RunEvents,
    input_tokens: u64,
) -> Result<ModelReply, ProviderError> {
    let mut stream = provider.stream(request).await?;
    let mut answer = ResponseAssembler::new();
    while let Some(delta) = stream.next().await {
        let delta = delta?;
        if let StreamDelta::Text { text } = &delta {
            events.emit(EventKind::TextDelta { text: text.clone() });
        }
        answer.push(delta);
    }
    let response = answer.finish(true)?;
    let (usage, usage_estimated) = match response.usage {
        Some(usage) => (usage, false),
        None => (
            Usage {
                input_tokens,
                output_tokens: estimate_output_tokens(&response),
            },
            true,
        ),
    };
    Ok(ModelReply {
        response,
        usage,
        usage_estimated,
        model: provider.model().to_owned(),
    })
}

fn estimate_output_tokens(response: &AssistantResponse) -> u64 {
    let calls: u64 = response
        .tool_calls
        .iter()
        .map(|c| (tokens::count_text(&c.name) + tokens::count_text(&c.arguments)) as u64)
        .sum();
    tokens::count_text(&response.text) as u64 + calls
}
