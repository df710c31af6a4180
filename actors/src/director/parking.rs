//! A Director run at a budget: a step's run that parks (its per-run budget, the month's
//! limit) parks the plan once the steps in flight have ended, its progress stored; a continue
//! goes on with the parked steps' runs (the same runs, their budgets raised) and the rest of
//! the plan, and a stop ends them.

use super::ending::{End, Totals};
use super::{Director, Steps};
use crate::event::{EventKind, ParkReason, RunEvents, RunOutcome, RunStatus};
use crate::ids::RunId;
use crate::session::{Continuation, RunSpec};
use ryvos_protocol::plan::StepEvent;
use ryvos_protocol::records::{ParkedPlan, PlanRecord, RunRecord, StepState};
use std::collections::HashMap;
use std::sync::Arc;

impl Director {
    /// The session's unfinished plan, as this run may take it up: a parked plan only by the
    /// continue of its own run (whose totals it goes on from), and a continue only of a parked
    /// plan.
    pub(super) fn take_up_parked(
        &self,
        unfinished: Option<PlanRecord>,
        spec: &RunSpec,
        totals: &mut Totals,
    ) -> Result<Option<PlanRecord>, End> {
        let continued = spec.continues.as_ref().map(|c| c.parked.run_id.clone());
        match (continued, unfinished) {
            (Some(run), Some(mut plan)) if plan.run_id == run && plan.parked.is_some() => {
                if let Some(parked) = plan.parked.take() {
                    totals.take_up(&parked);
                }
                Ok(Some(plan))
            }
            (Some(run), _) => Err(End::failed(format!(
                "run {run} cannot go on: it is not a parked Director run"
            ))),
            (None, Some(plan)) if plan.parked.is_some() => {
                let run = &plan.run_id;
                Err(End::failed(format!(
                    "the session's Director run {run} is parked: `ryvos continue {run}` goes on \
                     with it, `ryvos stop {run}` ends it"
                )))
            }
            (None, unfinished) => Ok(unfinished),
        }
    }

    /// Goes on with the runs of the plan's parked steps (a step whose run completed since is
    /// done; one that ended otherwise runs again); the steps are then in flight. Gives each
    /// continued step's run as it parked: what it had spent is counted already.
    pub(super) async fn continue_parked_steps(
        &self,
        record: &mut PlanRecord,
        spec: &RunSpec,
        events: &RunEvents,
        running: &mut Steps,
    ) -> Result<HashMap<String, RunRecord>, End> {
        let mut continued = HashMap::new();
        let parked: Vec<String> = (record.steps.iter())
            .filter(|(_, p)| p.state == StepState::Parked)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &parked {
            let child = record.step_session(id);
            let run = match self.step_run(record, id).await? {
                Some(run) if run.status == Some(RunStatus::Parked) => run,
                ended => {
                    // Its run ended meanwhile: done if it completed, else the step runs again.
                    if let Some(progress) = record.steps.get_mut(id) {
                        match ended.filter(|r| r.status == Some(RunStatus::Completed)) {
                            Some(run) => {
                                progress.state = StepState::Done;
                                progress.output = run.output;
                            }
                            None => progress.state = StepState::Pending,
                        }
                    }
                    continue;
                }
            };
            events.emit(EventKind::DirectorStep {
                step: id.clone(),
                status: StepEvent::Started,
                step_session_id: child.clone(),
                step_run_id: Some(run.run_id.clone()),
                detail: "continued where it parked".into(),
            });
            if let Some(progress) = record.steps.get_mut(id) {
                progress.state = StepState::Running;
            }
            continued.insert(id.clone(), run.clone());
            self.spawn_step(running, id.clone(), child, continuing(spec, run, None));
        }
        if !parked.is_empty() {
            self.save(record).await?;
        }
        Ok(continued)
    }

    /// Ends a parked plan (`ryvos stop`): its parked steps' runs end with `status`, and the
    /// plan is finished; the same task again makes a new one.
    pub(super) async fn stop_parked(
        &self,
        record: &mut PlanRecord,
        spec: &RunSpec,
        status: RunStatus,
        reason: String,
    ) -> End {
        let ids: Vec<String> = record.steps.keys().cloned().collect();
        for id in ids {
            if record.state(&id) != StepState::Parked {
                continue;
            }
            match self.step_run(record, &id).await {
                Ok(Some(run)) if run.status == Some(RunStatus::Parked) => {
                    let ends = Some((status, reason.clone()));
                    let spec = continuing(spec, run, ends);
                    let child = record.step_session(&id);
                    if let Err(e) = self.run_spec_to_end(Some(child), spec).await {
                        tracing::warn!(step = %id, "a parked step's run could not be ended: {e}");
                    }
                }
                Ok(_) => {}
                Err(end) => return end,
            }
            if let Some(progress) = record.steps.get_mut(&id) {
                progress.state = StepState::Failed;
            }
        }
        record.finished = true;
        if let Err(end) = self.save(record).await {
            return end;
        }
        End {
            status,
            output: String::new(),
            reason: Some(reason),
            park: None,
        }
    }

    /// `end`, with the plan's park stored first when it parks (durable before it is said).
    pub(super) async fn parked_if(
        &self,
        end: End,
        record: &mut PlanRecord,
        spec: &RunSpec,
        totals: &Totals,
    ) -> End {
        if end.park.is_none() {
            return end;
        }
        record.parked = Some(ParkedPlan {
            reason: end.park,
            message: end.reason.clone().unwrap_or_default(),
            turns: totals.turns,
            input_tokens: totals.input_tokens,
            output_tokens: totals.output_tokens,
            cost_cents: totals.cost_cents,
            duration_ms: totals.duration_ms(),
            settings: spec.settings.clone(),
        });
        match self.save(record).await {
            Ok(()) => end,
            Err(failed) => failed,
        }
    }

    /// The latest run of step `id`, from its session's records.
    async fn step_run(&self, record: &PlanRecord, id: &str) -> Result<Option<RunRecord>, End> {
        let Some(run_id) = record.steps.get(id).and_then(|p| p.run_id.clone()) else {
            return Ok(None);
        };
        let runs = (self.store.session_runs(&record.step_session(id)).await)
            .map_err(|e| End::failed(format!("reading step '{id}''s runs: {e}")))?;
        Ok(runs.into_iter().find(|r| r.run_id == run_id))
    }
}

/// `spec` taking up the parked `run` (with the Director's settings now: a raised budget), or
/// ending it as `ends_as` says.
fn continuing(spec: &RunSpec, run: RunRecord, ends_as: Option<(RunStatus, String)>) -> RunSpec {
    RunSpec {
        prompt: String::new(),
        goal: run.goal.clone().map(Arc::new),
        directed_by: run.directed_by.clone(),
        continues: Some(Continuation {
            parked: Box::new(run),
            ends_as,
        }),
        ..spec.clone()
    }
}

/// Step `id`'s run parked: the step waits for the continue, and says so.
pub(super) fn record_parked_step(
    record: &mut PlanRecord,
    id: &str,
    ran: &RunOutcome,
    events: &RunEvents,
) -> (StepEvent, String) {
    let detail = ran.reason.clone().unwrap_or_default();
    let progress = record.steps.entry(id.to_owned()).or_default();
    progress.state = StepState::Parked;
    progress.run_id = Some(ran.run_id.clone());
    progress.output = detail.clone();
    events.emit(EventKind::DirectorStep {
        step: id.to_owned(),
        status: StepEvent::Parked,
        step_session_id: record.step_session(id),
        step_run_id: Some(ran.run_id.clone()),
        detail: detail.clone(),
    });
    (StepEvent::Parked, detail)
}

/// How the Director run parks because step `id`'s run `ran` did.
pub(super) fn step_parked(id: &str, ran: &RunOutcome, director: &RunId) -> End {
    let reason = ran.park_reason.unwrap_or(ParkReason::BudgetRun);
    let what = match reason {
        ParkReason::BudgetRun => "its budget",
        ParkReason::BudgetMonth => "the month's limit",
        ParkReason::Escalated => "an escalation",
    };
    End::parked(
        reason,
        format!(
            "step '{id}' reached {what} and parked; the plan parked once the steps in flight \
             ended, its progress stored. `ryvos continue {director} --budget-cents N` goes on \
             (N is each step's budget), the parked step first; `ryvos stop {director}` ends it"
        ),
    )
}
