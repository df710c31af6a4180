//! Reading a whole recorded answer body with a provider's decoder: for looking at
//! recorded bodies, and for fuzzing the readers.

use super::sse::{self, SseEvents};
use super::ProviderError;
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use std::time::Duration;

/// The wire formats a streamed answer comes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireFormat {
    OpenAi,
    Anthropic,
    /// OpenAI's Responses API.
    Responses,
}

/// Decodes a whole streamed response body, as read from the wire, the way a live answer is
/// read: server-sent events, the provider's decoder, then the answer assembled. For looking
/// at recorded bodies, and for fuzzing the readers. `chunks` are the body's pieces as they
/// arrived: lines and characters may be split across them.
pub async fn decode_body(
    format: WireFormat,
    chunks: Vec<bytes::Bytes>,
) -> Result<super::AssistantResponse, ProviderError> {
    let chunks = chunks.into_iter().map(Ok::<_, reqwest::Error>);
    let events: SseEvents = Box::pin(futures_util::stream::iter(chunks).eventsource());
    let idle = Duration::from_secs(1);
    let mut deltas = match format {
        WireFormat::OpenAi => sse::decode_events(events, idle, super::openai::decode_event),
        WireFormat::Anthropic => sse::decode_events(events, idle, super::anthropic::decoder()),
        WireFormat::Responses => sse::decode_events(events, idle, super::responses::decoder(0)),
    };
    let mut assembler = super::ResponseAssembler::new();
    while let Some(delta) = deltas.next().await {
        assembler.push(delta?);
    }
    assembler.finish(true)
}
