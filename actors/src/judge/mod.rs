//! JudgeActor: evaluates goal-driven runs.
//!
//! When a run with a goal gives a final answer (and, if configured, every few turns), the
//! session asks the Judge for a verdict. Level 0 criteria (`contains`, `equals`, `regex`,
//! `command`) are checked for free; `llm` criteria, and goals without criteria, go to the
//! model (or `[agent.judge] model`) with a fixed rubric. Each evaluation runs in its own task,
//! so a slow test command never holds the actor, and is cancelled with its run.

pub(crate) mod criteria;
pub(crate) mod goal;
pub(crate) mod rubric;
pub(crate) mod verdict;

pub(crate) use ryvos_protocol::goal::{
    Criterion, CriterionKind, CriterionOrigin, CriterionResult, Goal,
};
pub(crate) use ryvos_protocol::verdict::Verdict;
pub(crate) use verdict::Judgement;

use crate::callback::Callback;
use crate::config::JudgeConfig;
use crate::event::RunEvents;
use crate::llm_stream::{end_chat, open_chat, Heartbeat, ModelChain, ModelReply};
use crate::message::Message;
use crate::security::Gate;
use crate::supervision::{JobActor, JobMsg, Work};
use crate::telemetry::StepSpan;
use crate::tools::ToolContext;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use verdict::ModelOpinion;

/// The models that judge goals: `[agent.judge] model` on the primary's endpoint (with the
/// same retries), or, when it is empty, the configured chain (an evaluation brings its run's
/// own chain, which is used instead: see [`Evaluation::run_models`]).
pub(crate) fn models(
    model: &crate::config::ModelConfig,
    judge: &JudgeConfig,
    runs: &Arc<ModelChain>,
) -> Result<Arc<ModelChain>, crate::provider::ProviderError> {
    if judge.model.is_empty() {
        return Ok(runs.clone());
    }
    let config = crate::config::ModelConfig {
        model: judge.model.clone(),
        fallbacks: Vec::new(),
        ..model.clone()
    };
    let chain = crate::provider::chain_from_config(&config)?;
    Ok(Arc::new(ModelChain::new(
        chain,
        crate::provider::retry::RetryPolicy::from_config(model),
    )))
}

/// One evaluation to make.
pub(crate) struct Evaluation {
    pub goal: Arc<Goal>,
    /// The model's latest answer.
    pub answer: String,
    /// The conversation so far, for the judge model.
    pub conversation: Arc<Vec<Arc<Message>>>,
    /// Where `command` criteria run; cancelled when the run stops.
    pub ctx: ToolContext,
    /// The run's events: a model-written command's security decision is published there.
    pub events: RunEvents,
    /// The run's budget still allows a model call: without it the judge model is not asked.
    pub model_allowed: bool,
    /// The run's models (its per-run model first): they judge when `[agent.judge] model` is
    /// empty ("the run's").
    pub run_models: Arc<ModelChain>,
    pub on_done: Callback<Evaluated>,
}

/// An evaluation's outcome.
#[derive(Debug)]
pub(crate) struct Evaluated {
    pub judgement: Judgement,
    /// The judge model's call, to be billed, if one was made.
    pub judge_call: Option<ModelReply>,
    /// Judge attempts cut after the server began answering, to be billed.
    pub cut_calls: Vec<String>,
}

impl Evaluated {
    /// An evaluation that could not be made: no verdict, never acceptance.
    pub(crate) fn failed(why: &str) -> Self {
        Self {
            judgement: Judgement {
                verdict: Verdict::Continue,
                reason: format!("the goal could not be judged ({why}); not accepted"),
                score: 0.0,
                criteria: Vec::new(),
            },
            judge_call: None,
            cut_calls: Vec::new(),
        }
    }
}

/// The JudgeActor: see the module documentation.
pub(crate) type JudgeActor = JobActor<Judging>;

/// Messages of the [`JudgeActor`].
pub(crate) type JudgeMsg = JobMsg<Evaluation>;

/// What the Judge is started with.
#[derive(Clone)]
pub(crate) struct JudgeArgs {
    /// The models that judge `llm` criteria.
    pub models: Arc<ModelChain>,
    pub config: JudgeConfig,
    /// The security gate a model-written `command` criterion passes, as a `bash` call would.
    pub gate: Gate,
}

/// What the [`JudgeActor`] does with each [`Evaluation`].
pub(crate) struct Judging;

impl Work for Judging {
    type Job = Evaluation;
    type Args = JudgeArgs;
    const NAME: &'static str = "the Judge";

    fn run(args: &JudgeArgs, job: Evaluation) -> impl Future<Output = ()> + Send + 'static {
        let mut args = args.clone();
        if args.config.model.is_empty() {
            args.models = job.run_models.clone();
        }
        async move {
            let Evaluation {
                goal,
                answer,
                conversation,
                ctx,
                events,
                model_allowed,
                on_done,
                ..
            } = job;
            let cancel = ctx.cancel.clone();
            let asked = Asked {
                goal: &goal,
                answer: &answer,
                conversation: &conversation,
                ctx: &ctx,
                events: &events,
            };
            let evaluating = evaluate(&args, asked, model_allowed);
            tokio::select! {
                evaluated = evaluating => on_done.answer(evaluated),
                // The run stopped: nobody waits for the verdict.
                _ = cancel.cancelled() => {}
            }
        }
    }
}

/// What an evaluation looks at.
struct Asked<'a> {
    goal: &'a Goal,
    answer: &'a str,
    conversation: &'a [Arc<Message>],
    ctx: &'a ToolContext,
    events: &'a RunEvents,
}

/// Checks the free criteria, asks the judge model when it is needed and can still matter, and
/// decides.
async fn evaluate(args: &JudgeArgs, asked: Asked<'_>, model_allowed: bool) -> Evaluated {
    let events = asked.events;
    let span = events.trace().map(|t| t.judging(asked.goal.criteria.len()));
    let evaluated = evaluate_within(args, asked, model_allowed, span.as_ref()).await;
    if let (Some(trace), Some(span)) = (events.trace(), span) {
        trace.judged(span, &evaluated.judgement);
    }
    evaluated
}

/// [`evaluate`], in the Judge's span `within` when the run is traced.
async fn evaluate_within(
    args: &JudgeArgs,
    asked: Asked<'_>,
    model_allowed: bool,
    within: Option<&StepSpan>,
) -> Evaluated {
    let Asked {
        goal,
        answer,
        conversation,
        ctx,
        events,
    } = asked;
    let timeout = Duration::from_secs(args.config.command_timeout_secs.max(1));
    let mut free: Vec<CriterionResult> = Vec::new();
    for criterion in goal.criteria.iter().filter(|c| c.kind.is_deterministic()) {
        let result = match criteria::check_text(criterion, answer) {
            Some(result) => result,
            None => criteria::check_command(criterion, ctx, &args.gate, events, timeout).await,
        };
        free.push(result);
    }
    let judged: Vec<&Criterion> = goal
        .criteria
        .iter()
        .filter(|c| !c.kind.is_deterministic())
        .collect();
    // A threshold outside (0, 1] could accept anything or nothing: all criteria count then.
    let threshold = Some(args.config.accept_threshold)
        .filter(|t| *t > 0.0 && *t <= 1.0)
        .unwrap_or(1.0);
    let needs_model = !judged.is_empty() || goal.criteria.is_empty();
    if !needs_model || verdict::hopeless(goal, &free, threshold) {
        return Evaluated {
            judgement: verdict::decide(goal, free, ModelOpinion::NotAsked, threshold),
            judge_call: None,
            cut_calls: Vec::new(),
        };
    }
    if !model_allowed {
        let opinion =
            ModelOpinion::Unreadable("the run's budget allows no further model call".into());
        return Evaluated {
            judgement: verdict::decide(goal, free, opinion, threshold),
            judge_call: None,
            cut_calls: Vec::new(),
        };
    }
    let request = rubric::request(goal, &judged, conversation, answer);
    let chat = open_chat(events, within, &args.models, &request);
    let called = args
        .models
        .answer(&request, None, &Heartbeat::new(), None, &Default::default())
        .await;
    end_chat(events, chat, Some(&called));
    let (opinion, judge_call) = match called.result {
        Ok(reply) => {
            let opinion = match rubric::parse(&reply.response.text, &judged) {
                Some(answer) => ModelOpinion::Answered(answer),
                None => ModelOpinion::Unreadable(format!(
                    "the judge answered {:?}",
                    reply.response.text.chars().take(120).collect::<String>()
                )),
            };
            (opinion, Some(reply))
        }
        Err(e) => (ModelOpinion::Unreadable(e.to_string()), None),
    };
    Evaluated {
        judgement: verdict::decide(goal, free, opinion, threshold),
        judge_call,
        cut_calls: called.cut_calls,
    }
}
