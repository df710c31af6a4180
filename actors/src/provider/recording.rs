//! Recording a run's model traffic, and replaying it.
//!
//! A recording is JSON lines, one per model call: what was asked (the number of messages and
//! the last one, for a reader's orientation) and every delta of the answer, exactly as the
//! provider streamed it. [`ReplayProvider`] answers the n-th request with the n-th answer, so a
//! recorded run can be shown again with no network and no key; the tools still run for real.

use super::{ChatRequest, DeltaStream, EncodedPrefix, Provider, ProviderError, StreamDelta};
use crate::message::Message;
use async_trait::async_trait;
use futures_util::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// One recorded model call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct RecordedCall {
    pub model: String,
    /// How many messages the request held.
    pub messages: usize,
    /// The request's last message.
    pub last: Option<Message>,
    /// The answer, delta by delta.
    pub deltas: Vec<StreamDelta>,
}

/// Answers from a recording, in order.
pub(crate) struct ReplayProvider {
    model: String,
    calls: Vec<RecordedCall>,
    next: AtomicUsize,
    path: PathBuf,
}

impl ReplayProvider {
    /// Loads the recording at `path`.
    pub(crate) fn open(path: &Path, model: &str) -> Result<Self, ProviderError> {
        let bad = |why: String| {
            ProviderError::Config(format!("the replay file {}: {why}", path.display()))
        };
        if path.as_os_str().is_empty() {
            return Err(ProviderError::Config(
                "provider = \"replay\" needs [model] replay_file, a recording made with `ryvos run --record FILE`".into(),
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let calls = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| serde_json::from_str(l).map_err(|e| bad(format!("line {}: {e}", i + 1))))
            .collect::<Result<Vec<RecordedCall>, _>>()?;
        Ok(Self {
            model: model.to_owned(),
            calls,
            next: AtomicUsize::new(0),
            path: path.to_owned(),
        })
    }
}

#[async_trait]
impl Provider for ReplayProvider {
    fn model(&self) -> &str {
        &self.model
    }

    async fn stream(&self, _request: &ChatRequest) -> Result<DeltaStream, ProviderError> {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let Some(call) = self.calls.get(n) else {
            return Err(ProviderError::Config(format!(
                "the replay file {} holds {} answer(s); request {} of this run has none",
                self.path.display(),
                self.calls.len(),
                n + 1
            )));
        };
        Ok(Box::pin(futures_util::stream::iter(
            call.deltas.clone().into_iter().map(Ok),
        )))
    }
}

/// Wraps a provider and appends every call it answers to a recording.
pub struct RecordingProvider {
    inner: Arc<dyn Provider>,
    file: Arc<Mutex<std::fs::File>>,
}

impl RecordingProvider {
    /// Records `inner`'s answers to `path` (created, or appended to).
    pub fn create(inner: Arc<dyn Provider>, path: &Path) -> Result<Self, ProviderError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| {
                ProviderError::Config(format!("opening the recording {}: {e}", path.display()))
            })?;
        Ok(Self {
            inner,
            file: Arc::new(Mutex::new(file)),
        })
    }
}

#[async_trait]
impl Provider for RecordingProvider {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn provider_name(&self) -> &str {
        self.inner.provider_name()
    }

    /// Recording changes nothing of what a call costs: a model on loopback stays free.
    fn runs_locally(&self) -> bool {
        self.inner.runs_locally()
    }

    fn key_label(&self) -> String {
        self.inner.key_label()
    }

    async fn stream(&self, request: &ChatRequest) -> Result<DeltaStream, ProviderError> {
        self.stream_continuing(request, &EncodedPrefix::default())
            .await
    }

    async fn stream_continuing(
        &self,
        request: &ChatRequest,
        encoded: &EncodedPrefix,
    ) -> Result<DeltaStream, ProviderError> {
        let inner = self.inner.stream_continuing(request, encoded).await?;
        Ok(Box::pin(Tee {
            inner,
            call: RecordedCall {
                model: self.inner.model().to_owned(),
                messages: request.messages.len(),
                last: request.messages.last().map(|m| (**m).clone()),
                deltas: Vec::new(),
            },
            file: self.file.clone(),
            written: false,
        }))
    }
}

/// Passes deltas through as they come and writes the call once the answer is complete.
struct Tee {
    inner: DeltaStream,
    call: RecordedCall,
    file: Arc<Mutex<std::fs::File>>,
    written: bool,
}

impl Stream for Tee {
    type Item = Result<StreamDelta, ProviderError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.inner.poll_next_unpin(cx);
        match &polled {
            Poll::Ready(Some(Ok(delta))) => self.call.deltas.push(delta.clone()),
            Poll::Ready(None) if !self.written => {
                self.written = true;
                // One short line per model call, flushed at once so a crash keeps it.
                let written = serde_json::to_string(&self.call)
                    .map_err(std::io::Error::other)
                    .and_then(|line| {
                        let mut file = self.file.lock().map_err(|_| {
                            std::io::Error::other("the recording's lock is poisoned")
                        })?;
                        writeln!(file, "{line}").and_then(|_| file.flush())
                    });
                if let Err(e) = written {
                    return Poll::Ready(Some(Err(ProviderError::Config(format!(
                        "writing the recording: {e}"
                    )))));
                }
            }
            _ => {}
        }
        polled
    }
}
