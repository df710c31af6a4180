//! Reading a streamed answer: the body as server-sent events, each event's data decoded into
//! deltas by the provider's own decoder, until its end marker. Read failures are named: a
//! read timeout is an idle stream, a broken transfer a cut one, bytes that are not UTF-8 or
//! not SSE a malformed chunk.

use super::http::{error_chain, truncate};
use super::{DeltaStream, ProviderError, StreamDelta};
use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::StreamExt;
use std::collections::VecDeque;
use std::time::Duration;

/// How long the rest of a body is read after its end marker: the body's last chunk is usually
/// there already, and reading it lets the connection go back to the pool for the next turn
/// (dropping a body before its end closes the connection: a new TLS handshake per turn).
const DRAIN_AFTER_END: Duration = Duration::from_millis(200);
/// The most events read after the end marker.
const MAX_EVENTS_AFTER_END: usize = 16;

/// What one event's data amounts to.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Decoded {
    pub deltas: Vec<StreamDelta>,
    /// The event marks the end of the answer (`[DONE]`, `message_stop`).
    pub end: bool,
}

/// A response body read as server-sent events.
pub(crate) type SseEvents = std::pin::Pin<
    Box<
        dyn futures_util::Stream<
                Item = Result<eventsource_stream::Event, EventStreamError<reqwest::Error>>,
            > + Send,
    >,
>;

/// One event's `data:` payload, read as `T`; a payload that is not one is malformed.
pub(crate) fn payload<T: serde::de::DeserializeOwned>(data: &str) -> Result<T, ProviderError> {
    serde_json::from_str(data).map_err(|e| ProviderError::Malformed {
        line: truncate(data, 500),
        reason: e.to_string(),
    })
}

/// A request's JSON body.
pub(crate) fn body(request: &impl serde::Serialize) -> Result<Vec<u8>, ProviderError> {
    serde_json::to_vec(request).map_err(ProviderError::encoding)
}

/// What a failure to read the event stream stands for.
fn read_error(e: EventStreamError<reqwest::Error>, idle: Duration) -> ProviderError {
    match e {
        EventStreamError::Transport(t) if t.is_timeout() => ProviderError::IdleTimeout(idle),
        EventStreamError::Transport(t) => ProviderError::StreamCut(error_chain(&t)),
        EventStreamError::Utf8(u) => ProviderError::Malformed {
            line: String::from_utf8_lossy(u.as_bytes())
                .chars()
                .take(200)
                .collect(),
            reason: "not valid UTF-8".into(),
        },
        EventStreamError::Parser(p) => ProviderError::Malformed {
            line: truncate(&p.to_string(), 500),
            reason: "not a server-sent event".into(),
        },
    }
}

struct Reading<D> {
    events: SseEvents,
    decode: D,
    pending: VecDeque<StreamDelta>,
    saw_finish: bool,
    done: bool,
    /// The end marker came (so the rest of the body is read before letting go of it).
    ended: bool,
    idle_timeout: Duration,
}

/// Reads what is left of a body after its end marker, briefly and boundedly.
async fn drain(events: &mut SseEvents) {
    let rest = async {
        for _ in 0..MAX_EVENTS_AFTER_END {
            if !matches!(events.next().await, Some(Ok(_))) {
                return;
            }
        }
    };
    if tokio::time::timeout(DRAIN_AFTER_END, rest).await.is_err() {
        tracing::debug!("the model server kept the body open after its end marker");
    }
}

/// The deltas of `response`'s body, decoded event by event with `decode`. The stream ends at
/// the end marker; a body that ends before it is cut, unless the model already said it had
/// finished.
pub(crate) fn deltas<D>(
    response: reqwest::Response,
    idle_timeout: Duration,
    decode: D,
) -> DeltaStream
where
    D: FnMut(&str) -> Result<Decoded, ProviderError> + Send + 'static,
{
    decode_events(
        Box::pin(response.bytes_stream().eventsource()),
        idle_timeout,
        decode,
    )
}

/// As [`deltas`], from events already parsed.
pub(crate) fn decode_events<D>(events: SseEvents, idle_timeout: Duration, decode: D) -> DeltaStream
where
    D: FnMut(&str) -> Result<Decoded, ProviderError> + Send + 'static,
{
    let reading = Reading {
        events,
        decode,
        pending: VecDeque::new(),
        saw_finish: false,
        done: false,
        ended: false,
        idle_timeout,
    };
    Box::pin(futures_util::stream::unfold(reading, |mut st| async move {
        loop {
            if let Some(delta) = st.pending.pop_front() {
                return Some((Ok(delta), st));
            }
            if st.done {
                if st.ended {
                    drain(&mut st.events).await;
                }
                return None;
            }
            match st.events.next().await {
                None => {
                    st.done = true;
                    if !st.saw_finish {
                        let cut = ProviderError::StreamCut(
                            "the server closed the stream before the answer finished".into(),
                        );
                        return Some((Err(cut), st));
                    }
                }
                Some(Err(e)) => {
                    st.done = true;
                    return Some((Err(read_error(e, st.idle_timeout)), st));
                }
                Some(Ok(event)) => {
                    let data = event.data.trim();
                    if data.is_empty() {
                        continue;
                    }
                    match (st.decode)(data) {
                        Ok(decoded) => {
                            st.saw_finish |= decoded
                                .deltas
                                .iter()
                                .any(|d| matches!(d, StreamDelta::Finish { .. }));
                            st.pending.extend(decoded.deltas);
                            st.done = decoded.end;
                            st.ended = decoded.end;
                        }
                        Err(e) => {
                            st.done = true;
                            return Some((Err(e), st));
                        }
                    }
                }
            }
        }
    }))
}
