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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// When a model call last showed life (a delta arrived), for the Guardian's stall detection.
/// Shared between the streaming task, which beats it, and the session, which reads it.
#[derive(Clone, Debug, Default)]
pub struct Heartbeat(Arc<AtomicU64>);

impl Heartbeat {
    /// A heartbeat that beats now.
    pub fn new() -> Self {
        let heartbeat = Self::default();
        heartbeat.beat();
        heartbeat
    }

    /// Records a sign of life now.
    pub fn beat(&self) {
        self.0.store(Self::now_ms(), Ordering::Relaxed);
    }

    /// How long since the last sign of life.
    pub fn silent_for(&self) -> Duration {
        Duration::from_millis(Self::now_ms().saturating_sub(self.0.load(Ordering::Relaxed)))
    }

    /// Milliseconds on a monotonic clock started with the process.
    fn now_ms() -> u64 {
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_millis() as u64
    }
}

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
    /// Publish the answer's text as `TextDelta` events (not for a summary, which is no answer).
    pub publish_text: bool,
    pub cancel: CancellationToken,
    /// Beaten on every delta.
    pub heartbeat: Heartbeat,
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
                        publish_text,
                        cancel,
                        heartbeat,
                        input_tokens,
                        on_done,
                    } = job;
                    let streaming = stream_answer(
                        provider.as_ref(),
                        &request,
                        publish_text.then_some(&events),
                        &heartbeat,
                        input_tokens,
                    );
                    let result = tokio::select! {
                        result = streaming => Some(result),
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
    events: Option<&RunEvents>,
    heartbeat: &Heartbeat,
    input_tokens: u64,
) -> Result<ModelReply, ProviderError> {
    let mut stream = provider.stream(request).await?;
    let mut answer = ResponseAssembler::new();
    while let Some(delta) = stream.next().await {
        let delta = delta?;
        heartbeat.beat();
        if let (StreamDelta::Text { text }, Some(events)) = (&delta, events) {
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
