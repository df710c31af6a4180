//! How a goal-driven run is judged: its final answer (and, when configured, its progress every
//! few turns) goes to the Judge; `Accept` completes the run, `Escalate` stops it, and `Retry`
//! (or an unreadable verdict) sends the model back to work with a note saying what is unmet,
//! up to `max_retries` times. Every verdict is published and stored with the run's turns.

use super::spending::Bill;
use super::{next_step, SessionMsg, SessionState};
use crate::callback::Callback;
use crate::event::{EventKind, RunStatus};
use crate::judge::{Evaluated, Evaluation, JudgeMsg, Judgement, Verdict};
use crate::message::Message;
use crate::session::run::{AfterBilling, Ending, Phase};
use crate::store::{now_ms, VerdictRecord};
use ractor::ActorRef;

impl SessionState {
    /// Whether this turn's progress is due for a periodic evaluation.
    pub(super) fn periodic_judging_due(&self) -> bool {
        let every = self.services.agent.judge.evaluate_every_turns;
        self.run
            .as_ref()
            .is_some_and(|r| r.goal.is_some() && every > 0 && r.turns % every == 0)
    }

    /// Asks the Judge about `answer`; the run waits in [`Phase::Judging`].
    pub(super) fn judge(&mut self, myself: &ActorRef<SessionMsg>, answer: String, periodic: bool) {
        // The answer is stored before it is judged: a slow check must not risk it.
        let checkpoint = self.turn_checkpoint(Vec::new());
        self.submit(myself, checkpoint, None);
        let conversation = self.history.snapshot();
        let next_seq = self.history.next_seq();
        let Some(run) = self.run.as_mut() else { return };
        run.turn_first_seq = next_seq;
        let Some(goal) = run.goal.clone() else { return };
        run.step = next_step();
        let step = run.step;
        run.phase = Phase::Judging {
            answer: answer.clone(),
            periodic,
        };
        let me = myself.clone();
        let job = Evaluation {
            goal,
            answer,
            conversation,
            ctx: run.tool_context(&self.id),
            events: run.events.clone(),
            model_allowed: run.refusal.is_none(),
            on_done: Callback::new(
                move |evaluated| {
                    if me.cast(SessionMsg::Judged { step, evaluated }).is_err() {
                        tracing::debug!("a verdict arrived for a session that has stopped");
                    }
                },
                || Evaluated::failed("the Judge was lost (its actor or task failed)"),
            ),
        };
        // Undelivered, the job answers its callback: no verdict, so no acceptance.
        self.services.judge.send(JudgeMsg::Evaluate(Box::new(job)));
    }

    /// The Judge has spoken: the verdict is published, stored, and acted on.
    pub(super) fn on_judged(&mut self, myself: &ActorRef<SessionMsg>, evaluated: Evaluated) {
        let Some(run) = self.run.as_mut() else { return };
        let Phase::Judging { answer, periodic } =
            std::mem::replace(&mut run.phase, Phase::BetweenTurns)
        else {
            return;
        };
        let turn = run.turns;
        let judgement = evaluated.judgement;
        // The verdict is published and stored first: whatever follows, it is not lost.
        run.judging.verdicts += 1;
        run.events.emit(EventKind::JudgeVerdict {
            verdict: judgement.verdict,
            reason: judgement.reason.clone(),
            score: judgement.score,
            criteria: judgement.criteria.clone(),
            periodic,
        });
        run.judging.unstored.push(VerdictRecord {
            run_id: run.id.clone(),
            n: run.judging.verdicts,
            turn,
            at_ms: now_ms(),
            judgement: judgement.clone(),
        });
        // The judge model's calls are paid for like any.
        let judge_input = evaluated
            .judge_call
            .as_ref()
            .map_or(0, |r| r.usage.input_tokens);
        let mut bills = Bill::cut_calls(turn, &evaluated.cut_calls, judge_input);
        bills.extend(evaluated.judge_call.as_ref().map(|r| Bill::of(turn, r)));
        let then = AfterBilling::Verdict {
            answer,
            periodic,
            judgement,
        };
        self.bill_then(myself, bills, then);
    }

    /// Acts on the Judge's verdict on `answer`, once its calls are recorded.
    pub(super) fn act_on_verdict(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        answer: String,
        periodic: bool,
        judgement: Judgement,
    ) {
        let max_retries = self.services.agent.judge.max_retries;
        let Some(run) = self.run.as_mut() else { return };
        let turn = run.turns;
        match (judgement.verdict, periodic) {
            (Verdict::Accept, _) => self.finish_with(
                myself,
                Ending {
                    status: RunStatus::Completed,
                    output: answer,
                    reason: None,
                },
            ),
            (Verdict::Escalate, _) => self.finish(
                myself,
                RunStatus::Escalated,
                Some(format!("the Judge escalated: {}", judgement.reason)),
            ),
            (_, true) => {
                // Mid-run and not met yet: the work goes on, unprompted.
                let status = format!("not met yet at turn {turn}: {}", judgement.reason);
                run.refocus(Some(&status));
                self.submit(myself, None, None);
                self.begin_turn(myself);
            }
            (Verdict::Retry | Verdict::Continue, false) => {
                run.judging.retries += 1;
                let retries = run.judging.retries;
                if retries > max_retries {
                    return self.finish(
                        myself,
                        RunStatus::Escalated,
                        Some(format!(
                            "the goal was not met after {max_retries} retries: {}",
                            judgement.reason
                        )),
                    );
                }
                let note = if judgement.verdict == Verdict::Retry {
                    format!(
                        "[Judge] Your answer does not meet the goal yet: {}. Keep working on it, \
                         then give your final answer again (retry {retries} of {max_retries}).",
                        judgement.reason
                    )
                } else {
                    format!(
                        "[Judge] Your answer could not be confirmed to meet the goal ({}). Check \
                         your work against the criteria, then give your final answer again \
                         (retry {retries} of {max_retries}).",
                        judgement.reason
                    )
                };
                let status = format!("retry {retries} of {max_retries}: {}", judgement.reason);
                run.refocus(Some(&status));
                // The note goes with the next turn; the verdict is stored now.
                self.history.push(Message::System { content: note });
                self.submit(myself, None, None);
                self.begin_turn(myself);
            }
        }
    }
}
