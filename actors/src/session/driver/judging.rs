//! How a goal-driven run is judged: its final answer (and, when configured, its progress every
//! few turns) goes to the Judge; `Accept` completes the run, `Escalate` stops (or parks) it, and `Retry`
//! (or an unreadable verdict) sends the model back to work with a note saying what is unmet,
//! up to `max_retries` times. Every verdict is published and stored with the run's turns.

use super::spending::Bill;
use super::{Driver, Ending, Step};
use crate::event::{CallPurpose, EventKind, ParkReason, RunStatus};
use crate::judge::{Evaluated, Evaluation, Judgement, Verdict};
use crate::message::Message;
use crate::store::{now_ms, VerdictRecord};

impl Driver {
    /// Whether this turn's progress is due for a periodic evaluation.
    pub(super) fn periodic_judging_due(&self) -> bool {
        let every = self.session.services.agent.judge.evaluate_every_turns;
        self.run.goal().is_some() && every > 0 && self.run.turns().is_multiple_of(every)
    }

    /// Has the Judge evaluate `answer` (the final one, unless `periodic`) and acts on its
    /// verdict: the run ends, or goes on with the next turn.
    pub(super) async fn judge(&mut self, answer: String, periodic: bool) -> Step<()> {
        // The answer is stored before it is judged: a slow check must not risk it.
        self.close_turn(Vec::new(), None);
        let Some(goal) = self.run.goal().cloned() else {
            return Ok(());
        };
        let run = &self.run;
        let evaluation = self.session.services.judge.evaluate(|on_done| Evaluation {
            goal,
            answer: answer.clone(),
            conversation: self.session.history.snapshot(),
            ctx: run.tool_context(&self.session.id),
            events: run.events().clone(),
            model_allowed: run.spent().may_call(),
            run_models: run.call().models().clone(),
            on_done,
        });
        let evaluated = self
            .wait(evaluation)
            .await?
            .unwrap_or_else(|| Evaluated::failed("the Judge was lost (its actor or task failed)"));
        let judgement = self.record_verdict(evaluated, periodic).await?;
        self.act_on_verdict(answer, periodic, judgement)
    }

    /// Publishes and stores the verdict (first: whatever follows, it is not lost), and bills
    /// the judge model's calls like any.
    async fn record_verdict(&mut self, evaluated: Evaluated, periodic: bool) -> Step<Judgement> {
        let run = &mut self.run;
        let turn = run.turns();
        let judgement = evaluated.judgement;
        let n = run.oversight_mut().next_verdict();
        run.events().emit(EventKind::JudgeVerdict {
            verdict: judgement.verdict,
            reason: judgement.reason.clone(),
            score: judgement.score,
            criteria: judgement.criteria.clone(),
            periodic,
        });
        let run_id = run.id().clone();
        run.oversight_mut().keep_verdict(VerdictRecord {
            run_id,
            n,
            turn,
            at_ms: now_ms(),
            judgement: judgement.clone(),
        });
        let judge_call = evaluated.judge_call.as_ref();
        let judge_input = judge_call.map_or(0, |r| r.usage.input_tokens);
        let mut bills = Bill::cut_calls(turn, &evaluated.cut_calls, judge_input);
        bills.extend(judge_call.map(|r| Bill::of(turn, r)));
        self.bill(CallPurpose::Judge, bills).await?;
        Ok(judgement)
    }

    /// The run escalated for `reason`: it parks for a person to look at, where so configured
    /// (`park_on_escalate`), else it ends `escalated`.
    fn escalated(&mut self, reason: String) -> Ending {
        if self.session.services.agent.judge.park_on_escalate {
            self.park(ParkReason::Escalated, &reason)
        } else {
            self.end(RunStatus::Escalated, reason)
        }
    }

    /// Acts on the Judge's verdict on `answer`.
    fn act_on_verdict(&mut self, answer: String, periodic: bool, judgement: Judgement) -> Step<()> {
        let max_retries = self.session.services.agent.judge.max_retries;
        let turn = self.run.turns();
        match (judgement.verdict, periodic) {
            (Verdict::Accept, _) => Err(Ending::completed(answer)),
            (Verdict::Escalate, _) => {
                let reason = format!("the Judge escalated: {}", judgement.reason);
                Err(self.escalated(reason))
            }
            (_, true) => {
                // Mid-run and not met yet: the work goes on, unprompted.
                let status = format!("not met yet at turn {turn}: {}", judgement.reason);
                self.run.refocus(Some(&status));
                self.submit(None, None);
                Ok(())
            }
            (Verdict::Retry | Verdict::Continue, false) => {
                let retries = self.run.oversight_mut().retried();
                if retries > max_retries {
                    let reason = format!(
                        "the goal was not met after {max_retries} retries: {}",
                        judgement.reason
                    );
                    return Err(self.escalated(reason));
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
                self.run.refocus(Some(&status));
                // The note goes with the next turn; the verdict is stored now.
                self.session.history.push(Message::System { content: note });
                self.submit(None, None);
                Ok(())
            }
        }
    }
}
