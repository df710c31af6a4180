//! Making one model call survive the real world: each provider of the chain (the primary
//! model, then its fallbacks) is tried with retries; transient failures wait a backoff with
//! jitter, or what the server asked for; a rejected request moves on to the next model at once;
//! a request too large for the context window goes back to the session to be pruned.
//!
//! A stream cut mid-answer is tried again too: tools only run once an answer is complete, so
//! no tool has been run from a cut one. Text it already showed is superseded, and the
//! `ModelRetry` event says so.

use super::{Heartbeat, ModelAnswer, ModelReply};
use crate::event::{EventKind, RunEvents};
use crate::provider::retry::{Backoffs, RetryPolicy};
use crate::provider::{
    AssistantResponse, ChatRequest, EncodedPrefix, Provider, ProviderError, Recovery,
    ResponseAssembler, StreamDelta, Usage,
};
use crate::text::clip_middle;
use crate::tokens;
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The models a call may be answered by, in order, and how each is retried.
pub(crate) struct ModelChain {
    providers: Vec<Arc<dyn Provider>>,
    policy: RetryPolicy,
}

/// What one attempt came to.
struct Attempt {
    result: Result<ModelReply, ProviderError>,
    /// The server had started answering (and so may bill the request).
    started: bool,
    /// Text of this attempt was shown.
    shown: bool,
}

impl ModelChain {
    /// A chain of `providers` (the first is the primary), retried as `policy` says.
    pub(crate) fn new(providers: Vec<Arc<dyn Provider>>, policy: RetryPolicy) -> Self {
        Self { providers, policy }
    }

    /// The primary model's name.
    pub(crate) fn model(&self) -> &str {
        self.providers.first().map_or("", |p| p.model())
    }

    /// Whose API the primary model is reached through.
    pub(crate) fn provider_name(&self) -> &str {
        self.providers.first().map_or("", |p| p.provider_name())
    }

    /// Whether `model` of the chain is served on this machine (and so costs nothing unless
    /// priced).
    pub(crate) fn serves_locally(&self, model: &str) -> bool {
        self.providers
            .iter()
            .any(|p| p.model() == model && p.runs_locally())
    }

    /// The models of the chain served on this machine, which cost nothing unless priced.
    pub(crate) fn local_models(&self) -> impl Iterator<Item = &str> {
        self.providers
            .iter()
            .filter(|p| p.runs_locally())
            .map(|p| p.model())
    }

    /// Streams an answer to `request`, publishing text on `events` when given; see the module
    /// documentation for what is tried when.
    pub(crate) async fn answer(
        &self,
        request: &ChatRequest,
        events: Option<&RunEvents>,
        heartbeat: &Heartbeat,
        counted_input: Option<u64>,
        encoded: &EncodedPrefix,
    ) -> ModelAnswer {
        let mut call = Call {
            request,
            encoded,
            events,
            heartbeat,
            counted_input,
            failures: Vec::new(),
            last_error: None,
            cut_calls: Vec::new(),
        };
        let mut previous: Option<(&str, GaveUp)> = None;
        for provider in &self.providers {
            let model = provider.model();
            if let (Some((from, gave_up)), Some(events)) = (&previous, events) {
                events.emit(EventKind::ModelFallback {
                    message: format!(
                        "{from} is unavailable ({}); asking {model} instead",
                        gave_up.why
                    ),
                    from: (*from).to_owned(),
                    to: model.to_owned(),
                    discarded_text: gave_up.shown,
                });
            }
            match self.try_model(provider.as_ref(), &mut call).await {
                Ok(reply) => {
                    return ModelAnswer {
                        result: Ok(reply),
                        cut_calls: call.cut_calls,
                        lost: false,
                    }
                }
                Err(Stop::Call(error)) => {
                    return ModelAnswer {
                        result: Err(error),
                        cut_calls: call.cut_calls,
                        lost: false,
                    }
                }
                Err(Stop::Model(gave_up)) => previous = Some((model, gave_up)),
            }
        }
        let error = match call.last_error {
            // A single attempt's error speaks for itself (bounded: a server may say a lot).
            Some(error) if call.failures.len() == 1 => bounded(error),
            _ => ProviderError::Exhausted(call.failures),
        };
        ModelAnswer {
            result: Err(error),
            cut_calls: call.cut_calls,
            lost: false,
        }
    }

    /// Tries one model with retries, within its own deadline: a model that hangs does not use
    /// up the time of the fallbacks after it.
    async fn try_model(
        &self,
        provider: &dyn Provider,
        call: &mut Call<'_>,
    ) -> Result<ModelReply, Stop> {
        let model = provider.model();
        let deadline = Instant::now() + self.policy.deadline;
        let mut backoffs = self.policy.backoffs();
        loop {
            call.heartbeat.beat();
            let key = provider.key_label();
            let attempt = tokio::time::timeout_at(
                deadline,
                one_attempt(
                    provider,
                    call.request,
                    call.encoded,
                    call.events,
                    call.heartbeat,
                ),
            )
            .await;
            let Ok(attempt) = attempt else {
                let why = format!(
                    "its deadline ({}s, call_deadline_secs) passed",
                    self.policy.deadline.as_secs()
                );
                call.failures
                    .push(format!("{}: {why}", attempt_name(model, &key)));
                return Err(Stop::Model(GaveUp { why, shown: false }));
            };
            let error = match attempt.result {
                Ok(mut reply) => {
                    // Counted past the deadline: the answer is had, and paid for.
                    if reply.usage_estimated {
                        reply.usage =
                            estimate_usage(call.request, &reply.response, call.counted_input);
                    }
                    return Ok(reply);
                }
                Err(error) => error,
            };
            if attempt.started {
                call.cut_calls.push(model.to_owned());
            }
            call.note_failure(model, &key, &error);
            call.last_error = Some(error.clone());
            let gave_up = |why: String| {
                Stop::Model(GaveUp {
                    why,
                    shown: attempt.shown,
                })
            };
            let said = error.to_string();
            match error.recovery() {
                Recovery::Prune => return Err(Stop::Call(error)),
                Recovery::FailFast => {
                    return Err(gave_up(clip_middle(&one_line(&said), MAX_ATTEMPT_BYTES)))
                }
                Recovery::Retry => {}
            }
            let wait = self
                .retry_wait(call, model, &error, &mut backoffs, deadline)
                .map_err(gave_up)?;
            call.announce_retry(model, &said, wait, attempt.shown);
            // A wait the server asked for is not a stall.
            call.heartbeat.quiet_for(wait);
            tokio::time::sleep(wait).await;
        }
    }

    /// How long to wait before the next attempt, or why there is none: the retries are used
    /// up, the server asked for too long a wait, or the wait would pass the model's deadline.
    fn retry_wait(
        &self,
        call: &mut Call<'_>,
        model: &str,
        error: &ProviderError,
        backoffs: &mut Backoffs,
        deadline: Instant,
    ) -> Result<Duration, String> {
        let why = match self.policy.next_wait(backoffs, error.retry_after()) {
            None => {
                let tries = self.policy.max_retries + 1;
                return Err(format!("{tries} attempts failed"));
            }
            Some(Err(asked)) => format!(
                "the server asked to wait {}s, more than max_retry_after_secs ({})",
                asked.as_secs(),
                self.policy.max_retry_after.as_secs()
            ),
            Some(Ok(wait)) if Instant::now() + wait > deadline => format!(
                "waiting {} ms more would pass its deadline ({}s, call_deadline_secs)",
                wait.as_millis(),
                self.policy.deadline.as_secs()
            ),
            Some(Ok(wait)) => return Ok(wait),
        };
        call.failures.push(format!("{model}: not retried: {why}"));
        Err(why)
    }
}

impl Call<'_> {
    /// Records a failed attempt of `model` with `key`.
    fn note_failure(&mut self, model: &str, key: &str, error: &ProviderError) {
        tracing::warn!(
            model,
            key = %key,
            attempt = self.failures.len() + 1,
            "a model call attempt failed: {error}"
        );
        let said = clip_middle(&one_line(&error.to_string()), MAX_ATTEMPT_BYTES);
        self.failures
            .push(format!("{}: {said}", attempt_name(model, key)));
    }

    /// Tells the run that `model`, which failed as `said` (after showing text, if `shown`),
    /// is asked again after `wait`.
    fn announce_retry(&self, model: &str, said: &str, wait: Duration, shown: bool) {
        let Some(events) = self.events else { return };
        events.emit(EventKind::ModelRetry {
            message: format!(
                "{model} failed ({}); trying again in {}",
                clip_middle(&one_line(said), MAX_ATTEMPT_BYTES),
                humantime::format_duration(round_ms(wait))
            ),
            model: model.to_owned(),
            attempt: self.failures.len() as u32 + 1,
            wait_ms: wait.as_millis() as u64,
            discarded_text: shown,
        });
    }
}

/// One call in progress over the chain.
struct Call<'a> {
    request: &'a ChatRequest,
    /// What the run's last call encoded.
    encoded: &'a EncodedPrefix,
    events: Option<&'a RunEvents>,
    heartbeat: &'a Heartbeat,
    /// The request's size as the session counted it, when it did.
    counted_input: Option<u64>,
    /// Every failed attempt, described, oldest first.
    failures: Vec<String>,
    last_error: Option<ProviderError>,
    cut_calls: Vec<String>,
}

/// Why a model was given up on.
struct GaveUp {
    why: String,
    /// Its last attempt had shown text.
    shown: bool,
}

/// How trying one model ended, when it gave no answer.
enum Stop {
    /// On to the next model.
    Model(GaveUp),
    /// The whole call ends with this error (the conversation must be pruned first).
    Call(ProviderError),
}

/// `error` with what the server said cut to [`MAX_ATTEMPT_BYTES`], its start and its end kept.
fn bounded(error: ProviderError) -> ProviderError {
    match error {
        ProviderError::Http {
            status,
            message,
            retry_after,
        } => ProviderError::Http {
            status,
            message: clip_middle(&message, MAX_ATTEMPT_BYTES),
            retry_after,
        },
        ProviderError::Stream(message) => {
            ProviderError::Stream(clip_middle(&message, MAX_ATTEMPT_BYTES))
        }
        other => other,
    }
}

/// "gpt-4o (key 2 of 3)", or the model alone.
fn attempt_name(model: &str, key: &str) -> String {
    if key.is_empty() {
        model.to_owned()
    } else {
        format!("{model} ({key})")
    }
}

/// The most of one attempt's error a run's reason repeats, in bytes: enough for a server's
/// words after what it quotes (a chat template's source, say).
const MAX_ATTEMPT_BYTES: usize = 600;

/// `text` on one line: its lines joined by spaces, blank ones left out.
fn one_line(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines.join(" ")
}

fn round_ms(wait: Duration) -> Duration {
    Duration::from_millis(wait.as_millis() as u64)
}

/// One request to one provider, streamed to its end.
async fn one_attempt(
    provider: &dyn Provider,
    request: &ChatRequest,
    encoded: &EncodedPrefix,
    events: Option<&RunEvents>,
    heartbeat: &Heartbeat,
) -> Attempt {
    let mut attempt = Attempt {
        result: Err(ProviderError::StreamCut(String::new())),
        started: false,
        shown: false,
    };
    let mut stream = match provider.stream_continuing(request, encoded).await {
        Ok(stream) => stream,
        Err(e) => {
            attempt.result = Err(e);
            return attempt;
        }
    };
    attempt.started = true;
    let mut answer = ResponseAssembler::new();
    while let Some(delta) = stream.next().await {
        let delta = match delta {
            Ok(delta) => delta,
            Err(e) => {
                attempt.result = Err(e);
                return attempt;
            }
        };
        heartbeat.beat();
        if let (StreamDelta::Text { text }, Some(events)) = (&delta, events) {
            attempt.shown = true;
            events.emit(EventKind::TextDelta { text: text.clone() });
        }
        answer.push(delta);
    }
    let response = match answer.finish(true) {
        Ok(response) => response,
        Err(e) => {
            attempt.result = Err(e);
            return attempt;
        }
    };
    // Without the server's usage, the caller counts it, outside the attempt's deadline.
    let (usage, usage_estimated) = match response.usage {
        Some(usage) => (usage, false),
        None => (Usage::default(), true),
    };
    attempt.result = Ok(ModelReply {
        response,
        usage,
        usage_estimated,
        model: provider.model().to_owned(),
    });
    attempt
}

/// The usage of a call the server reported none for, counted: its input as the caller counted
/// it (`input`), else the request itself; and the answer. Counting may build the tokenizer: see
/// [`tokens::blocking`].
fn estimate_usage(
    request: &ChatRequest,
    response: &AssistantResponse,
    input: Option<u64>,
) -> Usage {
    let count = |text: &str| u64::from(tokens::count_text(text));
    tokens::blocking(|| {
        let input_tokens = input.unwrap_or_else(|| {
            let specs = serde_json::to_string(&*request.tools).unwrap_or_default();
            let messages: u64 = request
                .messages
                .iter()
                .map(|m| u64::from(tokens::count_message(m)))
                .sum();
            count(&request.system) + count(&specs) + messages
        });
        let calls: u64 = response
            .tool_calls
            .iter()
            .map(|c| count(&c.name) + count(&c.arguments))
            .sum();
        Usage {
            input_tokens,
            output_tokens: count(&response.text) + calls,
        }
    })
}
