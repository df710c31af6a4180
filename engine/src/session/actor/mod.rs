//! SessionActor: one conversation and the run it is driving.
//!
//! The loop, as states (see [`Phase`]): a model request goes out; its answer is appended; an
//! answer without tool calls ends the run; otherwise the calls run (after the turn is durable,
//! if any call has side effects), their results are appended paired with their calls, the turn
//! is checkpointed, and the next request goes out at once while the commit proceeds. A run ends
//! by answer, `max_turns`, `max_duration_secs`, a stop, or an error; its end is reported only
//! once everything it wrote is durable.
//!
//! Around each model call the cost ledger is asked first (is the budget left?) and told after
//! (what the call used); after each turn the Guardian reviews it, and a timer reports a stall
//! to it. Their answers (hints, a retry, a stop) are applied here.
//!
//! This file holds the actor, its messages and its state; [`turn`] holds the loop's steps,
//! [`storing`] how a turn is handed to the store, [`starting`] how a run begins, [`spending`]
//! the ledger's part, [`guardian`] the Guardian's, [`asking`] how both are asked without
//! blocking the mailbox, [`judging`] the Judge's, [`context`] how the conversation keeps within
//! its budget, [`pausing`] how an interrupt pauses it, [`ending`] how a run ends and is
//! reported, [`reload`] how a session comes back.

mod asking;
mod context;
mod ending;
mod guardian;
mod guarding;
mod judging;
mod pausing;
mod reload;
mod spending;
mod starting;
mod storing;
mod turn;

use super::commits::Commits;
use super::history::History;
use super::notice::{NoticeRef, SessionNotice};
use super::run::ActiveRun;
use super::{RunSpec, Services};
use crate::cost_ledger::Receipt;
use crate::event::{RunStatus, SessionEvents};
use crate::guardian::Review;
use crate::ids::{RunId, SessionId};
use crate::llm_stream::ModelAnswer;
use crate::store::{now_ms, StoreError};
use crate::tool_executor::ToolOutcome;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use spending::Bill;
use std::time::Duration;

/// A step number never used before in this process. Every dispatch (model request, tool batch,
/// final commit) takes one, and a reply is accepted only if it carries the step of the run in
/// flight, so a late reply from an earlier run (or an earlier phase) can never be mistaken for
/// a current one.
fn next_step() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// How long a finished run may wait for its last commit before it is reported failed.
const FINAL_COMMIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Messages of the [`SessionActor`].
pub(super) enum SessionMsg {
    /// Start a run (the supervisor has checked that none is in flight).
    StartRun { run_id: RunId, spec: RunSpec },
    /// What the first call of the run started at `step` needs has been gathered.
    Prepared {
        step: u64,
        prepared: starting::Preparation,
    },
    /// The model answered (or failed) the request sent at `step`.
    ModelDone { step: u64, answer: ModelAnswer },
    /// The calls dispatched at `step` finished.
    ToolsDone {
        step: u64,
        outcomes: Vec<ToolOutcome>,
    },
    /// The ledger recorded the calls billed at `step` (a receipt each), or could not.
    Billed {
        step: u64,
        receipts: Result<Vec<(Bill, Receipt)>, String>,
    },
    /// The Guardian reviewed the turn that ended at `step`.
    Reviewed { step: u64, review: Review },
    /// The Guardian answered (or not) the stall reported at `step`.
    StallReviewed { step: u64, review: Option<Review> },
    /// The oldest batch not yet confirmed was committed (or failed).
    Committed { result: Result<(), StoreError> },
    /// The summary asked for at `step` came back (or failed).
    SummaryDone { step: u64, answer: ModelAnswer },
    /// The Judge's evaluation asked for at `step` is back.
    Judged {
        step: u64,
        evaluated: crate::judge::Evaluated,
    },
    /// Time to look for a stall of the dispatch made at `step`.
    StallCheck { step: u64 },
    /// The run `run_id` reached its time limit, as `why` says.
    Deadline { run_id: RunId, why: String },
    /// The final commit of the run ending at `step` took too long.
    FinalCommitTimeout { step: u64 },
    /// End the run in flight with `status`.
    Stop { status: RunStatus, reason: String },
    /// Pause the run in flight (status `interrupted`) after its current step, or at once
    /// (`now`: the daemon is stopping).
    Interrupt { reason: String, now: bool },
    /// Ask the supervisor to stop this actor if it is still idle since `epoch`.
    Hibernate { epoch: u64 },
    /// Test hook: panic inside the handler.
    #[cfg(feature = "testing")]
    Panic,
}

/// What a session actor is started (or restarted) with.
pub(super) struct SessionArgs {
    pub id: SessionId,
    pub services: Services,
    pub events: SessionEvents,
    pub supervisor: NoticeRef,
    /// After a failure: the run that was in flight, and why it failed. It is ended with status
    /// `failed` and this reason once the session has reloaded.
    pub recover: Option<(RunId, String)>,
}

/// The actor; see the module documentation.
pub(super) struct SessionActor;

/// A session's state.
pub(super) struct SessionState {
    id: SessionId,
    services: Services,
    events: SessionEvents,
    supervisor: NoticeRef,
    recover: Option<(RunId, String)>,
    history: History,
    /// Why the session could not be loaded, if it could not.
    load_error: Option<String>,
    /// A commit failed: the memory may be ahead of the store, so reload before the next run.
    needs_reload: bool,
    created_at_ms: u64,
    commits: Commits,
    run: Option<ActiveRun>,
    last_run: Option<RunId>,
    /// The calls a paused run left pending, not yet taken up by another run.
    paused_calls: Vec<crate::ids::CallId>,
    /// The workspace of the latest run, kept on the session's record.
    workspace: Option<String>,
    /// The session's first prompt, clipped, kept on its record.
    title: Option<String>,
    /// How the latest run ended, kept on the session's record.
    last_status: Option<crate::event::RunStatus>,
    idle_epoch: u64,
}

impl Actor for SessionActor {
    type Msg = SessionMsg;
    type State = SessionState;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: SessionArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(SessionState {
            id: args.id,
            services: args.services,
            events: args.events,
            supervisor: args.supervisor,
            recover: args.recover,
            history: History::default(),
            load_error: None,
            needs_reload: true,
            created_at_ms: now_ms(),
            commits: Commits::default(),
            run: None,
            last_run: None,
            paused_calls: Vec::new(),
            workspace: None,
            title: None,
            last_status: None,
            idle_epoch: 0,
        })
    }

    /// Loads the history off the supervisor's path: `spawn` has already returned. Where
    /// daemons share the store, a session not yet leased is not touched (a reload may write
    /// its repairs): its first run loads it once it holds the lease. A session recovering from
    /// its actor's failure holds it already.
    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if state.services.store.node().is_none() || state.recover.is_some() {
            state.reload(&myself).await;
        }
        state.schedule_hibernation(&myself);
        Ok(())
    }

    /// Long because it is the actor's one dispatch: an arm per message, most a line or two,
    /// each dropping a stale reply before the loop's step in [`turn`] and its siblings runs.
    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SessionMsg::StartRun { run_id, spec } => state.start_run(&myself, run_id, spec).await,
            SessionMsg::Prepared { step, prepared } => {
                if state.is_current(step) {
                    state.on_prepared(&myself, prepared);
                }
            }
            SessionMsg::ModelDone { step, answer } => {
                if state.is_current(step) {
                    state.on_model_done(&myself, answer);
                }
            }
            SessionMsg::ToolsDone { step, outcomes } => {
                if state.is_current(step) {
                    state.on_tools_done(&myself, outcomes);
                }
            }
            SessionMsg::Billed { step, receipts } => {
                if state.is_current(step) {
                    state.on_billed(&myself, receipts);
                }
            }
            SessionMsg::Reviewed { step, review } => {
                if state.is_current(step) {
                    state.on_reviewed(&myself, review);
                }
            }
            SessionMsg::StallReviewed { step, review } => {
                if state.is_current(step) {
                    state.on_stall_reviewed(&myself, step, review);
                }
            }
            SessionMsg::SummaryDone { step, answer } => {
                if state.is_current(step) {
                    state.on_summary_done(&myself, answer);
                }
            }
            SessionMsg::Judged { step, evaluated } => {
                if state.is_current(step) {
                    state.on_judged(&myself, evaluated);
                }
            }
            SessionMsg::StallCheck { step } => {
                if state.is_current(step) {
                    state.check_stall(&myself, step);
                }
            }
            SessionMsg::Committed { result } => state.on_committed(&myself, result),
            SessionMsg::Deadline { run_id, why } => {
                if state.run.as_ref().is_some_and(|r| r.id == run_id) {
                    state.finish(&myself, RunStatus::Timeout, Some(why));
                }
            }
            SessionMsg::FinalCommitTimeout { step } => {
                if state.is_current(step) {
                    state.commits.failed(StoreError::from_cause(
                        "committing the run's last turn",
                        format!("no confirmation within {FINAL_COMMIT_TIMEOUT:?}"),
                    ));
                    state.complete(&myself);
                }
            }
            SessionMsg::Stop { status, reason } => state.finish(&myself, status, Some(reason)),
            SessionMsg::Interrupt { reason, now } => state.interrupt(&myself, reason, now),
            SessionMsg::Hibernate { epoch } => {
                if state.run.is_none() && epoch == state.idle_epoch {
                    let request = SessionNotice::Hibernate {
                        session_id: state.id.clone(),
                    };
                    if state.supervisor.send_message(request).is_err() {
                        tracing::debug!("the session supervisor is gone");
                    }
                }
            }
            #[cfg(feature = "testing")]
            SessionMsg::Panic => panic!("injected fault in session {}", state.id),
        }
        Ok(())
    }
}

impl SessionState {
    fn is_current(&self, step: u64) -> bool {
        self.run.as_ref().is_some_and(|r| r.step == step)
    }

    fn schedule_hibernation(&mut self, myself: &ActorRef<SessionMsg>) {
        self.idle_epoch += 1;
        let epoch = self.idle_epoch;
        let idle = Duration::from_secs(self.services.agent.session_idle_secs);
        myself.send_after(idle, move || SessionMsg::Hibernate { epoch });
    }
}
