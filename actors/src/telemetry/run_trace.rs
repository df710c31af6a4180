//! The spans of one run, in the GenAI semantic conventions: `invoke_agent ryvos` for the run,
//! `execute_tool {name}` for each tool call under it, `chat {model}` for each model call.
//!
//! Fed by the run's own events as they are published (tool calls, security decisions,
//! retries, the run's end), and by the model call's task, which opens and closes its span
//! around the call. Exists only while telemetry is on.

use super::names::*;
use super::Telemetry;
use crate::ids::{RunId, SessionId};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};
use ryvos_protocol::event::{EventKind, RunStatus};
use ryvos_protocol::verdict::Judgement;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One run's spans.
pub(crate) struct RunTrace {
    telemetry: Arc<Telemetry>,
    /// The run's span, the parent of the others.
    run: Context,
    open: Mutex<Open>,
}

/// The spans still open, and what is known of calls whose span is not open yet.
#[derive(Default)]
struct Open {
    tools: HashMap<String, (Context, Instant)>,
    /// The gate's decision on a call, kept until its span opens.
    decided: HashMap<String, Vec<KeyValue>>,
    /// The model call in flight, for its retries and fallbacks.
    chat: Option<Context>,
}

impl RunTrace {
    /// Opens the run's span, a child of `parent` (a caller's trace) or a new trace.
    pub(crate) fn start(
        telemetry: Arc<Telemetry>,
        session: &SessionId,
        run: &RunId,
        parent: Option<Context>,
    ) -> RunTrace {
        let tracer = telemetry.tracer();
        let span = tracer
            .span_builder(format!("{INVOKE_AGENT} {AGENT_NAME}"))
            .with_kind(SpanKind::Internal)
            .with_attributes([
                KeyValue::new(OPERATION_NAME, INVOKE_AGENT),
                KeyValue::new(AGENT_NAME_KEY, AGENT_NAME),
                KeyValue::new(CONVERSATION_ID, session.to_string()),
                KeyValue::new(RUN_ID, run.to_string()),
            ])
            .start_with_context(tracer, &parent.unwrap_or_default());
        RunTrace {
            telemetry,
            run: Context::new().with_span(span),
            open: Mutex::default(),
        }
    }

    /// The run's span as the parent of other runs' (a Director's steps).
    pub(crate) fn as_parent(&self) -> super::TraceParent {
        super::TraceParent::of(self.run.span().span_context().clone())
    }

    fn open(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes in an event of the run.
    pub(crate) fn on_event(&self, kind: &EventKind) {
        match kind {
            EventKind::SecurityDecision {
                call_id,
                tier,
                allowed,
                decided_by,
                ..
            } => self.decided(call_id.as_str(), &format!("{tier:?}"), *allowed, decided_by),
            EventKind::ToolStart {
                call_id,
                name,
                input,
            } => {
                let span = self.tool_span(call_id.as_str(), name, input);
                self.open()
                    .tools
                    .insert(call_id.to_string(), (span, Instant::now()));
            }
            EventKind::ToolEnd {
                call_id,
                name,
                is_error,
                output,
            } => self.tool_ended(call_id.as_str(), name, *is_error, output),
            EventKind::ModelRetry {
                message, attempt, ..
            } => self.chat_event(
                "gen_ai.retry",
                vec![
                    KeyValue::new("ryvos.attempt", i64::from(*attempt)),
                    KeyValue::new("message", message.clone()),
                ],
            ),
            EventKind::ModelFallback {
                message, from, to, ..
            } => self.chat_event(
                "gen_ai.fallback",
                vec![
                    KeyValue::new("ryvos.fallback.from", from.clone()),
                    KeyValue::new("ryvos.fallback.to", to.clone()),
                    KeyValue::new("message", message.clone()),
                ],
            ),
            EventKind::RunParked { reason, message } => {
                let reason = KeyValue::new(PARK_REASON, reason.as_str());
                (self.telemetry.instruments.runs_parked).add(1, std::slice::from_ref(&reason));
                let message = KeyValue::new("message", message.clone());
                (self.run.span()).add_event(PARKED, vec![reason, message]);
            }
            EventKind::ContextPruned { .. } => {
                (self.run.span()).add_event(COMPACTION, compaction_attributes(kind))
            }
            EventKind::RunComplete {
                status,
                turns,
                input_tokens,
                output_tokens,
                cost_cents,
                reason,
                ..
            } => self.end(
                *status,
                *turns,
                *input_tokens,
                *output_tokens,
                *cost_cents,
                reason,
            ),
            _ => {}
        }
    }

    /// The security gate's decision on a call: on its span, or kept until it opens.
    fn decided(&self, call_id: &str, tier: &str, allowed: bool, decided_by: &str) {
        let decision = vec![
            KeyValue::new(TOOL_TIER, tier.to_owned()),
            KeyValue::new(TOOL_ALLOWED, allowed),
            KeyValue::new(TOOL_DECIDED_BY, decided_by.to_owned()),
        ];
        let mut open = self.open();
        match open.tools.get(call_id) {
            Some((span, _)) => span.span().set_attributes(decision),
            None => {
                open.decided.insert(call_id.to_owned(), decision);
            }
        }
    }

    fn tool_ended(&self, call_id: &str, name: &str, is_error: bool, output: &str) {
        let open = self.open().tools.remove(call_id);
        // A call refused before it started has no span yet.
        let (span, started) = open.unwrap_or_else(|| {
            let span = self.tool_span(call_id, name, &serde_json::Value::Null);
            (span, Instant::now())
        });
        let mut attributes = vec![KeyValue::new(TOOL_NAME, name.to_owned())];
        if is_error {
            attributes.push(KeyValue::new(ERROR_TYPE, "tool_error"));
        }
        self.telemetry
            .instruments
            .tool_duration
            .record(started.elapsed().as_secs_f64(), &attributes);
        let span = span.span();
        if self.telemetry.capture_content {
            span.set_attribute(KeyValue::new(TOOL_CALL_RESULT, output.to_owned()));
        }
        if is_error {
            span.set_attribute(KeyValue::new(ERROR_TYPE, "tool_error"));
            span.set_status(Status::error("the tool call failed"));
        }
        span.end();
    }

    fn tool_span(&self, call_id: &str, name: &str, input: &serde_json::Value) -> Context {
        let tracer = self.telemetry.tracer();
        let mut attributes = vec![
            KeyValue::new(OPERATION_NAME, EXECUTE_TOOL),
            KeyValue::new(TOOL_NAME, name.to_owned()),
            KeyValue::new(TOOL_CALL_ID, call_id.to_owned()),
            KeyValue::new(TOOL_TYPE, "function"),
        ];
        if self.telemetry.capture_content && !input.is_null() {
            attributes.push(KeyValue::new(TOOL_CALL_ARGUMENTS, input.to_string()));
        }
        attributes.extend(self.open().decided.remove(call_id).unwrap_or_default());
        let span = tracer
            .span_builder(format!("{EXECUTE_TOOL} {name}"))
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes)
            .start_with_context(tracer, &self.run);
        self.run.with_span(span)
    }

    fn chat_event(&self, name: &'static str, attributes: Vec<KeyValue>) {
        if let Some(chat) = &self.open().chat {
            chat.span().add_event(name, attributes);
        }
    }

    /// Whether message contents go on spans (`[otel] capture_content`): the caller builds them
    /// only then.
    pub(crate) fn captures_content(&self) -> bool {
        self.telemetry.capture_content
    }

    /// Opens a model call's span: `chat {model}`, asked of `provider`, under `within` (a Judge's
    /// or a summary's span) or else the run's. `content` is what the model was sent, given only
    /// when [`Self::captures_content`].
    pub(crate) fn chat(
        &self,
        within: Option<&StepSpan>,
        model: &str,
        provider: &str,
        content: Option<ChatInput>,
    ) -> ChatSpan {
        let tracer = self.telemetry.tracer();
        let attributes = vec![
            KeyValue::new(OPERATION_NAME, CHAT),
            KeyValue::new(PROVIDER_NAME, provider.to_owned()),
            KeyValue::new(REQUEST_MODEL, model.to_owned()),
        ];
        let mut on_span = attributes.clone();
        if let Some(content) = content {
            on_span.push(KeyValue::new(SYSTEM_INSTRUCTIONS, content.system));
            on_span.push(KeyValue::new(INPUT_MESSAGES, content.messages));
        }
        let parent = within.map_or(&self.run, |step| &step.cx);
        let span = tracer
            .span_builder(format!("{CHAT} {model}"))
            .with_kind(SpanKind::Client)
            .with_attributes(on_span)
            .start_with_context(tracer, parent);
        let cx = parent.with_span(span);
        self.open().chat = Some(cx.clone());
        ChatSpan {
            cx,
            started: Instant::now(),
            attributes,
        }
    }

    /// Opens the span of a step the runtime takes for the run (a Judge's evaluation, a
    /// summary), under the run's span; its model call goes under it.
    fn step(&self, name: &'static str, attributes: Vec<KeyValue>) -> StepSpan {
        let tracer = self.telemetry.tracer();
        let span = tracer
            .span_builder(name)
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes)
            .start_with_context(tracer, &self.run);
        StepSpan {
            cx: self.run.with_span(span),
        }
    }

    /// Opens the span of the Judge's evaluation of an answer against `criteria` criteria.
    pub(crate) fn judging(&self, criteria: usize) -> StepSpan {
        self.step(JUDGE, vec![KeyValue::new(JUDGE_CRITERIA, criteria as i64)])
    }

    /// Ends the Judge's span with its verdict.
    pub(crate) fn judged(&self, step: StepSpan, judgement: &Judgement) {
        let span = step.cx.span();
        span.set_attributes([
            KeyValue::new(JUDGE_VERDICT, format!("{:?}", judgement.verdict)),
            KeyValue::new(JUDGE_SCORE, judgement.score),
        ]);
        if self.telemetry.capture_content {
            span.set_attribute(KeyValue::new(JUDGE_REASON, judgement.reason.clone()));
        }
        span.end();
    }

    /// Opens the span of a summary of `messages` messages about to leave the context.
    pub(crate) fn summarizing(&self, messages: usize) -> StepSpan {
        self.step(
            SUMMARIZE,
            vec![KeyValue::new(SUMMARY_MESSAGES, messages as i64)],
        )
    }

    /// Ends a summary's span; `failed` says why there is no summary.
    pub(crate) fn summarized(&self, step: StepSpan, failed: Option<&str>) {
        let span = step.cx.span();
        if let Some(why) = failed {
            span.set_attribute(KeyValue::new(ERROR_TYPE, "summary_failed"));
            span.set_status(Status::error(why.to_owned()));
        }
        span.end();
    }

    /// Ends the chat span of the call that just finished.
    pub(crate) fn chat_ended(&self, chat: ChatSpan, ended: ChatEnd<'_>) {
        self.open().chat = None;
        let instruments = &self.telemetry.instruments;
        let mut attributes = chat.attributes;
        let span = chat.cx.span();
        match ended {
            ChatEnd::Answered {
                model,
                response_id,
                finish_reason,
                input_tokens,
                output_tokens,
                output,
            } => {
                span.set_attributes([
                    KeyValue::new(RESPONSE_MODEL, model.to_owned()),
                    KeyValue::new(USAGE_INPUT_TOKENS, input_tokens as i64),
                    KeyValue::new(USAGE_OUTPUT_TOKENS, output_tokens as i64),
                ]);
                if let Some(id) = response_id {
                    span.set_attribute(KeyValue::new(RESPONSE_ID, id.to_owned()));
                }
                if let Some(output) = output {
                    span.set_attribute(KeyValue::new(OUTPUT_MESSAGES, output));
                }
                attributes.push(KeyValue::new(RESPONSE_MODEL, model.to_owned()));
                for (kind, tokens) in [("input", input_tokens), ("output", output_tokens)] {
                    let mut by_type = attributes.clone();
                    by_type.push(KeyValue::new(TOKEN_TYPE, kind));
                    instruments.token_usage.record(tokens, &by_type);
                }
                if let Some(reason) = finish_reason {
                    let reasons = opentelemetry::Array::String(vec![reason.to_owned().into()]);
                    span.set_attribute(KeyValue::new(
                        RESPONSE_FINISH_REASONS,
                        opentelemetry::Value::Array(reasons),
                    ));
                }
            }
            ChatEnd::Failed {
                error_type,
                message,
            } => {
                attributes.push(KeyValue::new(ERROR_TYPE, error_type.to_owned()));
                span.set_attribute(KeyValue::new(ERROR_TYPE, error_type.to_owned()));
                span.set_status(Status::error(message.to_owned()));
            }
        }
        instruments
            .operation_duration
            .record(chat.started.elapsed().as_secs_f64(), &attributes);
        span.end();
    }

    fn end(
        &self,
        status: RunStatus,
        turns: u32,
        input_tokens: u64,
        output_tokens: u64,
        cost_cents: Option<f64>,
        reason: &Option<String>,
    ) {
        // Calls still open were cut off with the run.
        self.telemetry
            .instruments
            .runs
            .add(1, &[KeyValue::new(RUN_STATUS, status.to_string())]);
        for (_, (tool, _)) in self.open().tools.drain() {
            tool.span().set_status(Status::error("the run ended first"));
            tool.span().end();
        }
        let span = self.run.span();
        span.set_attributes([
            KeyValue::new(RUN_STATUS, status.to_string()),
            KeyValue::new(RUN_TURNS, i64::from(turns)),
            KeyValue::new(USAGE_INPUT_TOKENS, input_tokens as i64),
            KeyValue::new(USAGE_OUTPUT_TOKENS, output_tokens as i64),
        ]);
        if let Some(cents) = cost_cents {
            span.set_attribute(KeyValue::new(RUN_COST_CENTS, cents));
        }
        // A parked run is not over: its continue is a span of its own.
        if !matches!(status, RunStatus::Completed | RunStatus::Parked) {
            span.set_attribute(KeyValue::new(ERROR_TYPE, status.to_string()));
            span.set_status(Status::error(reason.clone().unwrap_or_default()));
        }
        span.end();
    }
}

/// A model call's span, open while the call is.
pub(crate) struct ChatSpan {
    cx: Context,
    started: Instant,
    /// What the call's metric points carry.
    attributes: Vec<KeyValue>,
}

/// The span of a step the runtime takes for a run: a Judge's evaluation, a summary.
pub(crate) struct StepSpan {
    cx: Context,
}

/// What a model was sent, in the GenAI conventions' JSON (`gen_ai.system_instructions`,
/// `gen_ai.input.messages`).
pub(crate) struct ChatInput {
    pub system: String,
    pub messages: String,
}

/// How a model call ended.
pub(crate) enum ChatEnd<'a> {
    Answered {
        model: &'a str,
        response_id: Option<&'a str>,
        finish_reason: Option<&'a str>,
        input_tokens: u64,
        output_tokens: u64,
        /// The answer in the conventions' JSON (`gen_ai.output.messages`), when content is
        /// captured.
        output: Option<String>,
    },
    Failed {
        error_type: &'a str,
        message: &'a str,
    },
}

/// A compaction's counts, as its event on the run's span carries them.
fn compaction_attributes(kind: &EventKind) -> Vec<KeyValue> {
    let EventKind::ContextPruned {
        dropped_messages,
        summarized,
        tokens_before,
        tokens_after,
        facts_kept,
        facts_dropped,
        ..
    } = kind
    else {
        return Vec::new();
    };
    vec![
        KeyValue::new(SUMMARY_MESSAGES, *dropped_messages as i64),
        KeyValue::new("ryvos.summary.written", *summarized),
        KeyValue::new("ryvos.facts.kept", facts_kept.len() as i64),
        KeyValue::new("ryvos.facts.dropped", facts_dropped.len() as i64),
        KeyValue::new("ryvos.context.tokens_before", *tokens_before as i64),
        KeyValue::new("ryvos.context.tokens_after", *tokens_after as i64),
    ]
}
