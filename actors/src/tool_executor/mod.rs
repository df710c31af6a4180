//! ToolExecutorActor: runs the tool calls of one model response.
//!
//! Every call is looked up, its arguments parsed and validated against the tool's schema,
//! passed through the security gate (which may ask a person), then executed in its own task
//! with a timeout; whatever goes wrong becomes a tool result starting
//! with its kind (`unknown_tool`, `validation_error`, `execution_error`, `denied`), so the model
//! sees it and the loop goes on. The actor only dispatches: each batch runs in its own task, so
//! a slow tool never holds up another session's calls.

mod admission;

use crate::callback::Callback;
use crate::event::{EventKind, RunEvents};
use crate::ids::CallId;
use crate::interrupt::OnMessage;
use crate::message::{Message, ToolCall};
use crate::security::Gate;
use crate::supervision::{JobActor, JobMsg, Work};
use crate::tools::{compact_output, CallIdentity, Tool, ToolContext, ToolError, ToolRegistry};
use admission::Admitted;
pub(crate) use admission::CUT_OFF;
use futures_util::StreamExt;
use std::future::Future;
use std::time::Duration;

/// How long a tool that was told to stop may take to clean up before it is aborted.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// A call a crash cut off, for the next run to take up.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CutOffCall {
    pub id: CallId,
    /// What its `PreToolUse` hooks decided before the crash, as the audit keeps it: it is
    /// decided again from these, its hooks not asked twice.
    pub hooks: Vec<ryvos_protocol::hook::HookDecision>,
}

/// The result of one call, as the model will see it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutcome {
    pub call_id: CallId,
    pub name: String,
    pub content: String,
    pub is_error: bool,
}

impl From<ToolOutcome> for Message {
    /// The outcome as the conversation holds it.
    fn from(o: ToolOutcome) -> Message {
        Message::ToolResult {
            call_id: o.call_id,
            name: o.name,
            content: o.content,
            is_error: o.is_error,
        }
    }
}

/// The outcomes of calls that were lost before they could report (the executor failed).
pub(crate) fn lost_outcomes(calls: &[ToolCall]) -> Vec<ToolOutcome> {
    calls
        .iter()
        .map(|c| ToolOutcome {
            call_id: c.id.clone(),
            name: c.name.clone(),
            content: "execution_error: the tool executor failed before this call reported; it \
                      may or may not have run"
                .into(),
            is_error: true,
        })
        .collect()
}

/// How calls are run.
#[derive(Clone, Debug)]
pub(crate) struct ExecutionSettings {
    pub parallel: bool,
    pub max_parallel: usize,
    pub timeout: Duration,
    pub max_output_bytes: usize,
}

/// The calls of one response, and where their results go.
pub(crate) struct ToolBatch {
    pub calls: Vec<ToolCall>,
    /// The tools the run is offered (its session's MCP servers' too, when it has some).
    pub registry: ToolRegistry,
    /// The stored seq of the message that made the calls: with the session and each call's
    /// id, its idempotency key.
    pub made_at: u64,
    /// The calls a crash cut off, taken up by their effect class ([`take_up`]).
    pub cut_off: Vec<CutOffCall>,
    pub ctx: ToolContext,
    pub events: RunEvents,
    /// The answer stopped at the model's output limit: a call whose arguments are not whole
    /// was cut off there, and is answered so.
    pub cut_at_output_limit: bool,
    /// The host's callback, shown each result as it comes (it may interrupt the run).
    pub on_message: Option<OnMessage>,
    /// Receives the outcomes of the calls that ran, in call order; a call not started because
    /// the run was interrupted has none.
    pub on_done: Callback<Vec<ToolOutcome>>,
}

/// The ToolExecutorActor: see the module documentation.
pub(crate) type ToolExecutorActor = JobActor<Executing>;

/// Messages of the [`ToolExecutorActor`].
pub(crate) type ToolMsg = JobMsg<ToolBatch>;

/// What it is started with (and restarted with).
#[derive(Clone)]
pub(crate) struct ToolExecutorArgs {
    pub settings: ExecutionSettings,
    pub gate: Gate,
}

/// What the [`ToolExecutorActor`] does with each [`ToolBatch`].
pub(crate) struct Executing;

impl Work for Executing {
    type Job = ToolBatch;
    type Args = ToolExecutorArgs;
    const NAME: &'static str = "the tool executor";

    fn run(args: &ToolExecutorArgs, batch: ToolBatch) -> impl Future<Output = ()> + Send + 'static {
        let args = args.clone();
        async move {
            let outcomes = run_batch(
                &batch.registry,
                &args.gate,
                batch.calls,
                Context {
                    ctx: &batch.ctx,
                    made_at: batch.made_at,
                    cut_off: &batch.cut_off,
                    events: &batch.events,
                    settings: &args.settings,
                    cut_at_output_limit: batch.cut_at_output_limit,
                },
                batch.on_message.as_ref(),
            )
            .await;
            batch.on_done.answer(outcomes);
        }
    }
}

/// Runs `calls`, concurrently when the settings allow, and returns outcomes in call order.
/// Once the run is interrupted, calls not yet started are left for the next run (no outcome),
/// and so is a call waiting for a person's approval.
pub(crate) async fn run_batch(
    registry: &ToolRegistry,
    gate: &Gate,
    calls: Vec<ToolCall>,
    batch: Context<'_>,
    on_message: Option<&OnMessage>,
) -> Vec<ToolOutcome> {
    let Context { ctx, settings, .. } = batch;
    let width = if settings.parallel {
        settings.max_parallel.max(1)
    } else {
        1
    };
    let ran: Vec<Option<ToolOutcome>> =
        futures_util::stream::iter(calls.into_iter().map(|call| async {
            if ctx.interrupt.is_requested() {
                return None;
            }
            let outcome = run_call(registry, gate, call, batch).await?;
            // A run that ended meanwhile records its own results; the host is not shown these.
            if let Some(hook) = on_message.filter(|_| !ctx.cancel.is_cancelled()) {
                hook(&Message::from(outcome.clone()), &ctx.interrupt);
            }
            Some(outcome)
        }))
        .buffered(width)
        .collect()
        .await;
    ran.into_iter().flatten().collect()
}

/// Where a batch's calls run.
#[derive(Clone, Copy)]
pub(crate) struct Context<'a> {
    pub ctx: &'a ToolContext,
    /// See [`ToolBatch::made_at`].
    pub made_at: u64,
    /// See [`ToolBatch::cut_off`].
    pub cut_off: &'a [CutOffCall],
    pub events: &'a RunEvents,
    pub settings: &'a ExecutionSettings,
    /// See [`ToolBatch::cut_at_output_limit`].
    pub cut_at_output_limit: bool,
}

/// Runs one call; `None` when it was left for the next run (its approval is parked).
async fn run_call(
    registry: &ToolRegistry,
    gate: &Gate,
    call: ToolCall,
    batch: Context<'_>,
) -> Option<ToolOutcome> {
    let Context {
        ctx,
        made_at,
        events,
        settings,
        ..
    } = batch;
    // Decided first: a call the gate parks never starts, in this run.
    let (admitted, context) = admission::admit(registry, gate, &call, batch).await?;
    // What the call's `PreToolUse` hooks gave the model to read, beside its result.
    let context = context.map(|c| format!("[PreToolUse hook context] {c}"));
    let input_shown = serde_json::from_str(&call.arguments)
        .unwrap_or_else(|_| serde_json::Value::String(call.arguments.clone()));
    events.emit(EventKind::ToolStart {
        call_id: call.id.clone(),
        name: call.name.clone(),
        input: input_shown,
    });
    let result = match admitted {
        Admitted::Run(tool, input) => {
            let identity = CallIdentity::new(&ctx.session_id, made_at, &call.id);
            let result =
                execute_guarded(tool, input.clone(), (ctx, identity), settings.timeout).await;
            admission::told_hooks(&call, &input, result, (ctx, gate, events)).await
        }
        Admitted::Done(result) => Ok(result),
        Admitted::Refused(refused) => Err(refused),
    };
    let (content, is_error) = match admission::with_note(result, context) {
        Ok(output) => (output, false),
        Err(error) => (error, true),
    };
    let content = compact_output(content, settings.max_output_bytes);
    events.emit(EventKind::ToolEnd {
        call_id: call.id.clone(),
        name: call.name.clone(),
        is_error,
        output: content.clone(),
    });
    Some(ToolOutcome {
        call_id: call.id,
        name: call.name,
        content,
        is_error,
    })
}

/// Runs one tool in its own task, as call `call`: a panic, a timeout or the run's end becomes an
/// error result.
async fn execute_guarded(
    tool: std::sync::Arc<dyn Tool>,
    input: serde_json::Value,
    (ctx, call): (&ToolContext, CallIdentity),
    timeout: Duration,
) -> Result<String, String> {
    let run_cancel = ctx.cancel.clone();
    let mut call_ctx = ctx.clone();
    call_ctx.cancel = ctx.cancel.child_token();
    call_ctx.call = Some(call);
    let stop = call_ctx.cancel.clone();
    let mut task = tokio::spawn(async move { tool.execute(input, &call_ctx).await });
    let why_stopped = tokio::select! {
        joined = &mut task => return joined_result(joined),
        _ = tokio::time::sleep(timeout) => format!(
            "execution_error: the call did not finish within {}s and was stopped",
            timeout.as_secs()
        ),
        _ = run_cancel.cancelled() => "execution_error: the call was stopped because the run ended".to_owned(),
    };
    // Let the tool stop its own work (a shell kills its process group), then abort it.
    stop.cancel();
    if tokio::time::timeout(STOP_GRACE, &mut task).await.is_err() {
        task.abort();
    }
    Err(why_stopped)
}

fn joined_result(
    joined: Result<Result<String, ToolError>, tokio::task::JoinError>,
) -> Result<String, String> {
    match joined {
        Ok(Ok(output)) => Ok(output),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) if e.is_panic() => {
            let why = crate::supervision::panic_message(&*e.into_panic());
            Err(format!("execution_error: the tool panicked: {why}"))
        }
        Err(_) => Err("execution_error: the call was aborted".into()),
    }
}
