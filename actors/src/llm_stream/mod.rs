//! LlmStreamActor: asks the model and streams its answer.
//!
//! Each request runs in its own task: text deltas are published as `TextDelta` events the
//! moment they arrive, tool calls are assembled from their fragments, and the whole answer goes
//! back to the session. Failures are retried and fallback models asked as [`attempts`]
//! describes. A server that reports no usage gets it estimated with the tokenizer, and the
//! estimate is marked as such.

mod attempts;
mod chains;
mod spans;

pub(crate) use attempts::ModelChain;
pub(crate) use chains::ModelChains;
pub(crate) use spans::{end_chat, open_chat};
use spans::{end_summary, open_summary};

use crate::callback::Callback;
use crate::event::RunEvents;
pub(crate) use crate::heartbeat::Heartbeat;
use crate::provider::{AssistantResponse, ChatRequest, EncodedPrefix, ProviderError, Usage};
use crate::supervision::{JobActor, JobMsg, Work};
use std::future::Future;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The model's answer to one request.
#[derive(Clone, Debug)]
pub(crate) struct ModelReply {
    pub response: AssistantResponse,
    pub usage: Usage,
    /// True when the server sent no usage and it was estimated.
    pub usage_estimated: bool,
    /// The model that answered.
    pub model: String,
}

/// How a model call ended, with what it may have cost on the way.
#[derive(Debug)]
pub(crate) struct ModelAnswer {
    pub result: Result<ModelReply, ProviderError>,
    /// The models of attempts whose streams were cut after the server began to answer: they
    /// may have been billed for their input, and are counted whatever the call came to.
    pub cut_calls: Vec<String>,
    /// The job never ran: it was lost with an actor that failed. Asking again is safe.
    pub lost: bool,
}

impl ModelAnswer {
    /// A call that failed before any attempt was billed.
    pub(crate) fn failed(error: ProviderError) -> Self {
        Self {
            result: Err(error),
            cut_calls: Vec::new(),
            lost: false,
        }
    }

    /// A job lost with its actor (`what` says which), before it ran.
    pub(crate) fn lost(what: &str) -> Self {
        Self {
            lost: true,
            ..Self::failed(ProviderError::StreamCut(format!(
                "{what} was lost (its actor or task failed)"
            )))
        }
    }
}

/// One request to stream.
pub(crate) struct StreamJob {
    /// The models asked, in order: the run's.
    pub models: Arc<ModelChain>,
    pub request: ChatRequest,
    pub events: RunEvents,
    pub purpose: Purpose,
    /// The request's size in tokens as the session counted it, when every part of it is
    /// counted: a reply without usage is billed this much input without counting again.
    pub counted_input: Option<u64>,
    /// What the run's last call encoded, for this one to go on from (see
    /// [`EncodedPrefix`]).
    pub encoded: Arc<EncodedPrefix>,
    pub cancel: CancellationToken,
    /// Beaten on every delta.
    pub heartbeat: Heartbeat,
    /// Receives the answer (a cancelled job answers with its fallback, which the run ignores).
    pub on_done: Callback<ModelAnswer>,
}

/// What a model call is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// The run's next turn: its text is published as `TextDelta` events.
    Turn,
    /// A summary of `messages` messages about to leave the context: no answer, so nothing is
    /// published; traced in a span of its own.
    Summary { messages: usize },
}

/// The LlmStreamActor: see the module documentation.
pub(crate) type LlmStreamActor = JobActor<Streaming>;

/// Messages of the [`LlmStreamActor`].
pub(crate) type LlmMsg = JobMsg<StreamJob>;

/// What the [`LlmStreamActor`] does with each [`StreamJob`].
pub(crate) struct Streaming;

impl Work for Streaming {
    type Job = StreamJob;
    type Args = ();
    const NAME: &'static str = "the LLM stream actor";

    fn run(_: &(), job: StreamJob) -> impl Future<Output = ()> + Send + 'static {
        stream(job)
    }
}

/// Streams the answer to `job`, and answers it.
async fn stream(job: StreamJob) {
    let StreamJob {
        models: chain,
        request,
        events,
        purpose,
        counted_input,
        encoded,
        cancel,
        heartbeat,
        on_done,
    } = job;
    // From here on the model may be asked: a task that fails now has not lost the job
    // unasked, and it must not be asked again as if it had.
    let on_done = on_done.if_dropped(|| {
        ModelAnswer::failed(ProviderError::StreamCut(
            "the model call's task failed while it was being answered".into(),
        ))
    });
    let summary = open_summary(&events, purpose);
    let chat = open_chat(&events, summary.as_ref(), &chain, &request);
    let streaming = chain.answer(
        &request,
        (purpose == Purpose::Turn).then_some(&events),
        &heartbeat,
        counted_input,
        &encoded,
    );
    let result = tokio::select! {
        result = streaming => Some(result),
        _ = cancel.cancelled() => None,
    };
    end_chat(&events, chat, result.as_ref());
    end_summary(&events, summary, result.as_ref());
    // Release the history snapshot before answering, so the session can append without
    // copying it.
    drop(request);
    if let Some(result) = result {
        on_done.answer(result);
    }
}
