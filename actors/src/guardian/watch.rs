//! What the Guardian knows of one run, and how it answers each turn and each stall.
//!
//! Every problem goes up the same ladder: detect → hint → observe → a stronger hint → stop the
//! run with a status and a reason. Each step is an event. The state is small and bounded (a
//! streak, not a window of calls) and is stored with the turn that changed it, so a restarted
//! Guardian goes on where it stood.

use super::doom_loop::{extend, CallReport};
use crate::config::GuardianConfig;
use crate::event::{BudgetScope, EventKind, GuardianAction, RunStatus, StallPhase};
pub(super) use ryvos_protocol::records::{RunWatch, Streak};
use std::time::Duration;

/// The Guardian's settings, from `[agent.guardian]` and `max_context_tokens`.
#[derive(Clone, Debug)]
pub(crate) struct Thresholds {
    pub doom_loop: u32,
    pub soft_tokens: u64,
    pub hard_tokens: u64,
    pub max_context_tokens: u64,
}

impl Thresholds {
    pub(crate) fn new(config: &GuardianConfig, max_context_tokens: u64) -> Self {
        let percent = |p: u8| max_context_tokens.saturating_mul(u64::from(p)) / 100;
        Self {
            doom_loop: config.doom_loop_threshold.max(1),
            soft_tokens: percent(config.token_budget_soft),
            hard_tokens: percent(config.token_budget_hard),
            max_context_tokens,
        }
    }
}

/// A finished turn, as the session reports it.
#[derive(Clone, Debug, Default)]
pub(crate) struct TurnReport {
    /// The turn's tool calls, in call order.
    pub calls: Vec<CallReport>,
    /// The conversation's size after the turn (system prompt included).
    pub context_tokens: u64,
}

/// A corrective note for the conversation.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Hint {
    pub message: String,
    /// 1 for a first hint, 2 for a stronger one.
    pub level: u8,
}

/// What the session should do.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Review {
    /// Events to publish now, in order.
    pub events: Vec<EventKind>,
    /// A hint to put into the conversation before the next model call.
    pub hint: Option<Hint>,
    /// Cut the silent model call and make it again.
    pub retry_model_call: bool,
    /// Stop the run once the current turn is done.
    pub stop: Option<(RunStatus, String)>,
    /// The run's watch as it now stands, when this review changed it: the session stores it
    /// with the turn, so the Guardian's view and the history are durable together.
    pub watch: Option<RunWatch>,
}

/// The ladder every problem goes up, on the stored [`RunWatch`]: [`Ladder::review`] after each
/// turn, [`Ladder::stalled`] when progress stops.
pub(super) trait Ladder {
    /// Looks at a finished turn: its calls feed doom-loop detection, its size the token budget.
    fn review(&mut self, limits: &Thresholds, turn: &TurnReport) -> Review;

    /// No progress for `silent`: a silent model stream is cut and tried once more; tools that
    /// do not finish get a hint, a stronger one, then the run is stopped.
    fn stalled(&mut self, phase: StallPhase, silent: Duration, tools: &[String]) -> Review;
}

impl Ladder for RunWatch {
    fn review(&mut self, limits: &Thresholds, turn: &TurnReport) -> Review {
        let mut review = Review::default();
        // A finished turn is progress.
        self.stall_steps = 0;
        self.model_stalls = 0;
        // Every call counts where it stands: a loop that a last, different call ends (a call
        // cut at the output limit, which some servers put last) is a loop all the same.
        let mut looping: Option<Streak> = None;
        for call in &turn.calls {
            extend(&mut self.streak, call);
            if let Some(streak) = self.streak.as_ref().filter(|s| s.count >= limits.doom_loop) {
                if looping.as_ref().is_none_or(|l| streak.count >= l.count) {
                    looping = Some(streak.clone());
                }
            }
        }
        // The ladder goes down only after a turn without a loop.
        match looping {
            Some(streak) => escalate_doom_loop(self, &streak, &mut review),
            None => self.doom_steps = 0,
        }
        check_tokens(self, limits, turn.context_tokens, &mut review);
        review
    }

    fn stalled(&mut self, phase: StallPhase, silent: Duration, tools: &[String]) -> Review {
        let secs = silent.as_secs();
        let mut review = Review::default();
        let (action, message) = match phase {
            StallPhase::Model => {
                self.model_stalls = self.model_stalls.saturating_add(1);
                if self.model_stalls == 1 {
                    review.retry_model_call = true;
                    (
                        GuardianAction::Retry,
                        format!(
                            "the model stream was silent for {secs} s; the call was cut and is \
                             being made again (text shown from the cut call is discarded)"
                        ),
                    )
                } else {
                    (
                        GuardianAction::Stop,
                        format!(
                            "the model stream went silent for {secs} s on {} calls in a row; \
                             the run stopped rather than wait",
                            self.model_stalls
                        ),
                    )
                }
            }
            StallPhase::Tools => {
                self.stall_steps = self.stall_steps.saturating_add(1);
                let names = tools.join(", ");
                match self.stall_steps {
                    1 => (
                        GuardianAction::Hint,
                        format!(
                            "[Guardian] No progress for {secs} s: the call(s) to {names} did not \
                             finish. If a command waits for input or never ends, do not rely on \
                             it: give it a timeout, run it another way, or ask the user."
                        ),
                    ),
                    2 => (
                        GuardianAction::StrongerHint,
                        format!(
                            "[Guardian] Still no progress after {secs} s more: the call(s) to \
                             {names} are stuck. Avoid commands that can hang; if this happens \
                             again the run will be stopped."
                        ),
                    ),
                    _ => (
                        GuardianAction::Stop,
                        format!(
                            "the Guardian stopped the run: the call(s) to {names} made no \
                             progress through three stall timeouts"
                        ),
                    ),
                }
            }
        };
        review.events.push(EventKind::GuardianStall {
            message: message.clone(),
            phase,
            silent_secs: secs,
            action,
        });
        match (phase, action) {
            (_, GuardianAction::Retry) => {}
            (StallPhase::Model, GuardianAction::Stop) => {
                review.stop = Some((RunStatus::Failed, message))
            }
            (StallPhase::Tools, GuardianAction::Stop) => {
                review.stop = Some((RunStatus::Escalated, message))
            }
            _ => {
                review.hint = Some(Hint {
                    message,
                    level: self.stall_steps,
                })
            }
        }
        review
    }
}

fn escalate_doom_loop(watch: &mut RunWatch, streak: &Streak, review: &mut Review) {
    watch.doom_steps = watch.doom_steps.saturating_add(1);
    let (tool, n) = (&streak.tool, streak.count);
    let outcome = if streak.failed {
        "and each attempt failed"
    } else {
        "and got the same result each time"
    };
    let (action, message) = match watch.doom_steps {
        1 => (
            GuardianAction::Hint,
            format!(
                "[Guardian] You have called '{tool}' with the same input {n} times in a row, \
                 {outcome}. Try a different approach: read the output, fix the underlying \
                 issue, or use a different tool."
            ),
        ),
        2 => (
            GuardianAction::StrongerHint,
            format!(
                "[Guardian] You have now called '{tool}' with the same input {n} times in a \
                 row, {outcome}, after being told. Repeating it will not change the result. \
                 Change the input, take another approach, or give your final answer and say \
                 what blocks you. If the call is repeated once more, the run will be stopped."
            ),
        ),
        _ => (
            GuardianAction::Stop,
            format!(
                "the Guardian stopped the run: '{tool}' was called with the same input {n} \
                 times in a row, {outcome}, and two hints did not change that"
            ),
        ),
    };
    review.events.push(EventKind::GuardianDoomLoop {
        message: message.clone(),
        tool: tool.clone(),
        repeats: n,
        failed: streak.failed,
        action,
    });
    match action {
        GuardianAction::Stop => review.stop = Some((RunStatus::Escalated, message)),
        _ => {
            review.hint = Some(Hint {
                message,
                level: watch.doom_steps,
            })
        }
    }
}

fn check_tokens(watch: &mut RunWatch, limits: &Thresholds, context: u64, review: &mut Review) {
    let max = limits.max_context_tokens;
    let percent = context.saturating_mul(100) / max.max(1);
    if context >= limits.hard_tokens {
        let message = format!(
            "the conversation is {context} tokens, {percent}% of max_context_tokens \
             ({max}), past the hard limit of {} tokens; the run stopped after this turn",
            limits.hard_tokens
        );
        review.events.push(EventKind::BudgetExceeded {
            scope: BudgetScope::Tokens,
            spent: context.into(),
            limit: limits.hard_tokens.into(),
            message: message.clone(),
        });
        review.stop = Some((RunStatus::TokenBudgetExceeded, message));
    } else if context >= limits.soft_tokens && !watch.tokens_warned {
        watch.tokens_warned = true;
        review.events.push(EventKind::BudgetWarning {
            scope: BudgetScope::Tokens,
            spent: context.into(),
            limit: limits.hard_tokens.into(),
            message: format!(
                "the conversation is {context} tokens, {percent}% of max_context_tokens \
                 ({max}); the run stops at {} tokens",
                limits.hard_tokens
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Thresholds {
        Thresholds::new(&GuardianConfig::default(), 1000)
    }

    fn turn(calls: &[(&str, &str, &str, bool)], context_tokens: u64) -> TurnReport {
        TurnReport {
            calls: calls
                .iter()
                .map(|(t, a, o, f)| CallReport::new(t, a, o, *f))
                .collect(),
            context_tokens,
        }
    }

    #[test]
    fn the_same_failing_call_escalates_hint_stronger_hint_stop() {
        let mut w = RunWatch::default();
        let fail = [("bash", r#"{"command":"npm test"}"#, "exit 1", true)];
        assert_eq!(w.review(&limits(), &turn(&fail, 10)), Review::default());
        assert_eq!(w.review(&limits(), &turn(&fail, 10)), Review::default());
        let third = w.review(&limits(), &turn(&fail, 10));
        let hint = third.hint.expect("a hint at the threshold");
        assert!(hint.message.contains("'bash'") && hint.message.contains("3 times"));
        assert!(hint.message.contains("failed"));
        assert_eq!(hint.level, 1);
        assert_eq!(w.review(&limits(), &turn(&fail, 10)).hint.unwrap().level, 2);
        let (status, reason) = w.review(&limits(), &turn(&fail, 10)).stop.unwrap();
        assert_eq!(status, RunStatus::Escalated);
        assert!(reason.contains("5 times"));
    }

    #[test]
    fn repeats_a_last_cut_call_ends_are_seen_and_escalate() {
        let mut w = RunWatch::default();
        let read = ("read", r#"{"path":"missing.txt"}"#, "no such file", true);
        let cut = ("read", r#"{"path":"#, "cut off at the output limit", true);
        // Three identical failing reads, then the call the output limit cut, turn after turn.
        let shape = [read, read, read, cut];
        let first = w.review(&limits(), &turn(&shape, 10));
        assert_eq!(first.hint.expect("a hint at the first turn").level, 1);
        assert_eq!(
            w.review(&limits(), &turn(&shape, 10)).hint.unwrap().level,
            2
        );
        assert!(w.review(&limits(), &turn(&shape, 10)).stop.is_some());
    }

    #[test]
    fn edit_test_fix_with_changing_inputs_is_never_a_loop() {
        let mut w = RunWatch::default();
        for i in 0..20 {
            let edit = format!(
                r#"{{"path":"a.rs","old_string":"v{i}","new_string":"v{}"}}"#,
                i + 1
            );
            let r = w.review(
                &limits(),
                &turn(
                    &[
                        ("edit", &edit, "ok", false),
                        ("bash", r#"{"command":"cargo test"}"#, "1 failed", true),
                    ],
                    10,
                ),
            );
            assert_eq!(r, Review::default(), "turn {i}");
        }
    }

    #[test]
    fn token_thresholds_warn_once_then_stop() {
        let mut w = RunWatch::default();
        assert!(w.review(&limits(), &turn(&[], 799)).events.is_empty());
        let soft = w.review(&limits(), &turn(&[], 800));
        assert!(matches!(soft.events[..], [EventKind::BudgetWarning { .. }]));
        assert!(soft.stop.is_none());
        assert!(w.review(&limits(), &turn(&[], 900)).events.is_empty());
        let hard = w.review(&limits(), &turn(&[], 950));
        assert_eq!(hard.stop.unwrap().0, RunStatus::TokenBudgetExceeded);
    }

    #[test]
    fn a_silent_model_is_retried_once_then_the_run_fails() {
        let mut w = RunWatch::default();
        let first = w.stalled(StallPhase::Model, Duration::from_secs(5), &[]);
        assert!(first.retry_model_call && first.stop.is_none());
        let second = w.stalled(StallPhase::Model, Duration::from_secs(5), &[]);
        assert_eq!(second.stop.unwrap().0, RunStatus::Failed);
        // An answered turn resets the count.
        w.review(&limits(), &turn(&[], 10));
        assert!(
            w.stalled(StallPhase::Model, Duration::from_secs(5), &[])
                .retry_model_call
        );
    }
}
