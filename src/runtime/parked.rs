//! Parked runs taken up again: continued (the same run, its totals kept, its budget raised if
//! asked) or stopped.

use super::{Runtime, RuntimeError};
use crate::runtime::RunHandle;
use crate::shared_store::SharedStore;
use ryvos_actors::{Continuation, EngineError, RunSpec};
use ryvos_protocol::event::{Event, RunOutcome};
use ryvos_protocol::event::{ParkReason, RunStatus};
use ryvos_protocol::ids::RunId;
use ryvos_protocol::records::{PlanRecord, RunRecord, SessionRecord};
use ryvos_protocol::socket::ParkedRun;
use std::sync::Arc;
use tokio::sync::broadcast::{error::RecvError, Receiver};

/// Millionths of a cent in a cent, as the ledger counts.
const MICROCENTS_PER_CENT: u64 = 1_000_000;

impl Runtime {
    /// Continues the parked run `run_id` from where it parked: the same run, in its session's
    /// workspace, its turns and spending counted on; with `budget_cents`, its per-run limit is
    /// raised to that (the run's total, not what it may spend from now).
    pub async fn continue_run(
        &self,
        run_id: &RunId,
        budget_cents: Option<u64>,
    ) -> Result<RunHandle, RuntimeError> {
        let (session, parked) = match self.parked(run_id).await {
            Err(RuntimeError::NoSuchRun(_)) => match self.parked_director(run_id).await? {
                Some((session, plan)) => {
                    return self.take_up_director(session, plan, budget_cents, None);
                }
                None => return Err(RuntimeError::NoSuchRun(run_id.to_string())),
            },
            found => found?,
        };
        let mut settings = parked.settings.clone();
        if budget_cents.is_some() {
            settings.per_run_limit_cents = budget_cents;
        }
        if parked.park_reason == Some(ParkReason::BudgetRun) {
            let limit = settings
                .per_run_limit_cents
                .unwrap_or(self.budget.per_run_limit_cents);
            if limit > 0 && limit.saturating_mul(MICROCENTS_PER_CENT) <= parked.cost_microcents {
                let spent = parked.cost_microcents.div_ceil(MICROCENTS_PER_CENT);
                return Err(RuntimeError::BadRequest(format!(
                    "run {run_id} has spent {spent} cents of its {limit}-cent budget: give it a \
                     larger budget to go on, in cents, above {spent} (`ryvos continue {run_id} \
                     --budget-cents N`)"
                )));
            }
        }
        self.take_up(session, parked, settings, None).await
    }

    /// Ends the run `run_id`: a parked one with the end its park stands for
    /// (`budget_exceeded`), its record changed and `RunComplete` published; one in flight is
    /// cancelled. The handle follows it to its end.
    pub async fn stop_run(&self, run_id: &RunId) -> Result<RunHandle, RuntimeError> {
        let (session, run) = match self.latest_run(run_id).await {
            Err(RuntimeError::NoSuchRun(_)) => match self.parked_director(run_id).await? {
                Some((session, plan)) => {
                    let reason = "the run was stopped where it parked".to_owned();
                    let parked_for = plan.parked.as_ref().and_then(|p| p.reason);
                    let ends_as = Some((stopped_status(parked_for), reason));
                    return self.take_up_director(session, plan, None, ends_as);
                }
                None => return Err(RuntimeError::NoSuchRun(run_id.to_string())),
            },
            found => found?,
        };
        match run.as_ref().and_then(|r| r.status) {
            Some(RunStatus::Parked) => {
                let run = run.expect("a status is a record's");
                let reason = format!(
                    "the run was stopped where it parked ({})",
                    run.park_reason.map_or("parked", |r| r.as_str())
                );
                let settings = run.settings.clone();
                let ends_as = Some((stopped_status(run.park_reason), reason));
                self.take_up(session, run, settings, ends_as).await
            }
            Some(status) => Err(RuntimeError::NotParked(format!(
                "run {run_id} has ended already ({status})"
            ))),
            None => {
                // Followed from before the cancel, so that its end is seen.
                let events = self.subscribe();
                let cancelled = self.cancel(&session.session_id).await?;
                if !cancelled {
                    return Err(RuntimeError::NoSuchRun(run_id.to_string()));
                }
                Ok(RunHandle::following(
                    session.session_id,
                    run_id.clone(),
                    events,
                ))
            }
        }
    }

    /// The runs parked at a budget, oldest first (a Director run's parked plan is not among
    /// them: its parked step's run is).
    pub async fn parked_runs(&self) -> Result<Vec<ParkedRun>, RuntimeError> {
        let store = self.engine.store();
        let mut parked: Vec<(u64, ParkedRun)> = Vec::new();
        for run in self.parked_latest().await? {
            let reason = run.park_reason.unwrap_or(ParkReason::BudgetRun);
            let cents = run.cost_microcents as f64 / MICROCENTS_PER_CENT as f64;
            // A parked step stands for its Director, which is what is continued.
            let (run_id, session_id, cost_cents) = match run.directed_by {
                Some(director) => {
                    let plan =
                        (store.plan(&director.session_id).await).map_err(EngineError::from)?;
                    let spent = plan.and_then(|p| p.parked).map_or(cents, |p| p.cost_cents);
                    (director.run_id, director.session_id, spent)
                }
                None => (run.run_id, run.session_id, cents),
            };
            if parked.iter().any(|(_, p)| p.run_id == run_id) {
                continue;
            }
            let entry = ParkedRun {
                run_id,
                session_id,
                reason,
                cost_cents,
            };
            parked.push((run.started_at_ms, entry));
        }
        parked.sort_by_key(|(at, _)| *at);
        Ok(parked.into_iter().map(|(_, run)| run).collect())
    }

    /// The runs parked now: each the latest run of a session whose last status is `parked`.
    async fn parked_latest(&self) -> Result<Vec<RunRecord>, RuntimeError> {
        let store = self.engine.store();
        let mut parked = Vec::new();
        let sessions = self.sessions().await?;
        let waiting = sessions
            .iter()
            .filter(|s| s.last_status == Some(RunStatus::Parked));
        for session in waiting {
            let runs =
                (store.session_runs(&session.session_id).await).map_err(EngineError::from)?;
            parked.extend(
                runs.into_iter().find(|r| {
                    Some(&r.run_id) == session.last_run.as_ref() && r.park_reason.is_some()
                }),
            );
        }
        Ok(parked)
    }

    /// Starts the parked `run` again on its session, going on or ending as `ends_as` says.
    async fn take_up(
        &self,
        session: SessionRecord,
        run: RunRecord,
        settings: ryvos_actors::RunSettings,
        ends_as: Option<(RunStatus, String)>,
    ) -> Result<RunHandle, RuntimeError> {
        let workspace = super::default_workspace(Some(&session))?;
        let spec = RunSpec {
            prompt: String::new(),
            workspace,
            caller_dir: None,
            goal: run.goal.clone().map(Arc::new),
            on_message: None,
            editor_files: false,
            mcp_servers: Default::default(),
            session_tools: None,
            trace_parent: None,
            settings,
            directed_by: None,
            continues: Some(Continuation {
                parked: Box::new(run),
                ends_as,
            }),
        };
        let settling = self.settle_queue_at_end(&spec);
        let ticket = self
            .engine
            .start_run(Some(session.session_id), spec)
            .await?;
        settling.start();
        Ok(RunHandle::of(ticket))
    }

    /// Starts the parked Director run `plan` tells of again on its session: going on with
    /// its parked steps (their budgets raised to `budget_cents`) and the rest of its plan, or
    /// ending as `ends_as` says.
    fn take_up_director(
        &self,
        session: SessionRecord,
        plan: PlanRecord,
        budget_cents: Option<u64>,
        ends_as: Option<(RunStatus, String)>,
    ) -> Result<RunHandle, RuntimeError> {
        let parked = plan.parked.clone().unwrap_or_default();
        let mut settings = parked.settings.clone();
        if budget_cents.is_some() {
            settings.per_run_limit_cents = budget_cents;
        }
        let workspace = session
            .workspace
            .as_deref()
            .map(|dir| ryvos_actors::Workspace::new(std::path::Path::new(dir)))
            .transpose()?
            .ok_or_else(|| {
                RuntimeError::BadRequest(format!(
                    "session {} has no workspace on record",
                    session.session_id
                ))
            })?;
        let record = RunRecord {
            run_id: plan.run_id.clone(),
            session_id: session.session_id.clone(),
            prompt: plan.prompt.clone(),
            status: Some(RunStatus::Parked),
            reason: Some(parked.message),
            output: String::new(),
            turns: parked.turns,
            input_tokens: parked.input_tokens,
            output_tokens: parked.output_tokens,
            cost_microcents: (parked.cost_cents * MICROCENTS_PER_CENT as f64) as u64,
            started_at_ms: 0,
            ended_at_ms: None,
            goal: plan.goal.clone(),
            model: settings.model.clone(),
            park_reason: parked.reason,
            settings: settings.clone(),
            model_calls: 0,
            active_ms: parked.duration_ms,
            directed_by: None,
            start: None,
        };
        let spec = RunSpec {
            prompt: plan.prompt,
            workspace,
            caller_dir: None,
            goal: plan.goal.map(Arc::new),
            on_message: None,
            editor_files: false,
            mcp_servers: Default::default(),
            session_tools: None,
            trace_parent: None,
            settings,
            directed_by: None,
            continues: Some(Continuation {
                parked: Box::new(record),
                ends_as,
            }),
        };
        let settling = self.settle_queue_at_end(&spec);
        let ticket = self.engine.start_director(Some(session.session_id), spec)?;
        settling.start();
        Ok(RunHandle::of(ticket))
    }

    /// Where daemons share a queue, the queued run the continued run `spec` serves waits as
    /// `parked`: it is finished once the run ends (followed from before it starts, so that its
    /// end is heard).
    fn settle_queue_at_end(&self, spec: &RunSpec) -> Settling {
        let store = self.shared_store();
        let run = spec.continues.as_ref().map(|c| c.parked.run_id.clone());
        match (store.node(), run) {
            (Some(_), Some(run)) => Settling(Some((self.subscribe(), run, store))),
            _ => Settling(None),
        }
    }

    /// The parked Director run `run_id`, from its session's plan (a Director run keeps no run
    /// record of its own: its plan says where it stands).
    async fn parked_director(
        &self,
        run_id: &RunId,
    ) -> Result<Option<(SessionRecord, PlanRecord)>, RuntimeError> {
        // A parked Director has a parked step, which names it: no other session is read.
        let director = (self.parked_latest().await?)
            .into_iter()
            .find_map(|step| step.directed_by.filter(|d| d.run_id == *run_id));
        let Some(director) = director else {
            return Ok(None);
        };
        let store = self.engine.store();
        let plan = (store.plan(&director.session_id).await).map_err(EngineError::from)?;
        let plan = plan.filter(|p| p.run_id == *run_id && p.parked.is_some());
        let session = self.session(&director.session_id).await?;
        Ok(session.zip(plan))
    }

    /// The parked run `run_id` and its session.
    async fn parked(&self, run_id: &RunId) -> Result<(SessionRecord, RunRecord), RuntimeError> {
        let (session, run) = self.latest_run(run_id).await?;
        match run {
            // A Director's step goes on with its Director: alone, the plan would not know.
            Some(RunRecord {
                directed_by: Some(director),
                status: Some(RunStatus::Parked),
                ..
            }) => Err(RuntimeError::NotParked(format!(
                "run {run_id} is a step of the parked Director run {}: `ryvos continue {}` goes \
                 on with it",
                director.run_id, director.run_id
            ))),
            Some(run) if run.status == Some(RunStatus::Parked) => Ok((session, run)),
            Some(RunRecord {
                status: Some(status),
                ..
            }) => Err(RuntimeError::NotParked(format!(
                "run {run_id} is not parked: it has ended ({status})"
            ))),
            _ => Err(RuntimeError::NotParked(format!(
                "run {run_id} is not parked: it is in flight"
            ))),
        }
    }

    /// The session whose latest run is `run_id` (a parked run is always its session's latest:
    /// the session takes no other run meanwhile), and that run's record if it has one.
    async fn latest_run(
        &self,
        run_id: &RunId,
    ) -> Result<(SessionRecord, Option<RunRecord>), RuntimeError> {
        let sessions = self.sessions().await?;
        let Some(session) = sessions
            .into_iter()
            .find(|s| s.last_run.as_ref() == Some(run_id))
        else {
            return Err(RuntimeError::NoSuchRun(run_id.to_string()));
        };
        let runs = (self.engine.store())
            .session_runs(&session.session_id)
            .await
            .map_err(EngineError::from)?;
        let run = runs.into_iter().find(|r| r.run_id == *run_id);
        Ok((session, run))
    }
}

/// The end a parked run stopped where it parked has: as it would have ended unparked.
fn stopped_status(parked_for: Option<ParkReason>) -> RunStatus {
    match parked_for {
        Some(ParkReason::Escalated) => RunStatus::Escalated,
        _ => RunStatus::BudgetExceeded,
    }
}

/// A continued run's queued run, to finish once the run ends (see
/// [`Runtime::settle_queue_at_end`]).
struct Settling(Option<(Receiver<Arc<Event>>, RunId, SharedStore)>);

impl Settling {
    /// Follows the run to its end in a task of its own. A run that parks again leaves its
    /// queued run parked: its next continue settles it.
    fn start(self) {
        let Some((mut events, run, store)) = self.0 else {
            return;
        };
        tokio::spawn(async move {
            loop {
                let event = match events.recv().await {
                    Ok(event) if event.run_id == run => event,
                    Ok(_) => continue,
                    Err(RecvError::Lagged(_)) => {
                        // Its end may have been among them: `wait` still reads it from the run.
                        tracing::warn!(%run, "the queued run of a continued run stays parked: its events were missed");
                        return;
                    }
                    Err(RecvError::Closed) => return,
                };
                let Some(outcome) = RunOutcome::from_event(&event) else {
                    continue;
                };
                if outcome.status.is_end() {
                    if let Err(e) = store.settle_parked(&outcome).await {
                        tracing::warn!(%run, "the queued run of a continued run stays parked: {e}");
                    }
                }
                return;
            }
        });
    }
}
