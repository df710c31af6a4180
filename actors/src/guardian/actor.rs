//! GuardianActor: holds each run's [`RunWatch`], answers reviews and stalls, and stores every
//! change so that a restarted Guardian rebuilds its view from redb.

use super::watch::{Review, RunWatch, Thresholds};
use super::GuardianMsg;
use crate::callback::Callback;
use crate::checkpoint::CheckpointMsg;
use crate::event::EventKind;
use crate::ids::{RunId, SessionId};
use crate::store::{Store, StoreError, WriteBatch};
use crate::supervision::ChildSlot;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::collections::HashMap;
use std::time::Duration;

/// How long a starting Guardian waits for the store's writer to finish what its predecessor
/// handed it.
const FLUSH_PATIENCE: Duration = Duration::from_secs(30);

/// What the Guardian is started with.
#[derive(Clone)]
pub struct GuardianArgs {
    pub store: Store,
    pub checkpoint: ChildSlot<CheckpointMsg>,
    pub thresholds: Thresholds,
}

/// The actor; see the module documentation of [`crate::guardian`].
pub struct GuardianActor;

/// Its state.
pub struct GuardianState {
    store: Store,
    checkpoint: ChildSlot<CheckpointMsg>,
    thresholds: Thresholds,
    runs: HashMap<RunId, RunWatch>,
    commit_error: Option<String>,
}

impl Actor for GuardianActor {
    type Msg = GuardianMsg;
    type State = GuardianState;
    type Arguments = GuardianArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: GuardianArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(GuardianState {
            store: args.store,
            checkpoint: args.checkpoint,
            thresholds: args.thresholds,
            runs: HashMap::new(),
            commit_error: None,
        })
    }

    /// Runs are read back from the store when first mentioned; first every write of a previous
    /// incarnation is let land.
    async fn post_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state
            .checkpoint
            .call(CheckpointMsg::Flush, FLUSH_PATIENCE)
            .await??;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            GuardianMsg::ReviewTurn {
                session_id,
                run_id,
                report,
                reply,
            } => {
                let thresholds = state.thresholds.clone();
                let review = state.update(&myself, &session_id, &run_id, |w| {
                    w.review(&thresholds, &report)
                });
                if reply.send(review).is_err() {
                    tracing::debug!(run = %run_id, "a review's caller left");
                }
            }
            GuardianMsg::Stalled {
                session_id,
                run_id,
                phase,
                silent_for,
                tools,
                reply,
            } => {
                let review = state.update(&myself, &session_id, &run_id, |w| {
                    w.stalled(phase, silent_for, &tools)
                });
                if reply.send(review).is_err() {
                    tracing::debug!(run = %run_id, "a stall report's caller left");
                }
            }
            GuardianMsg::RunEnded { run_id } => {
                state.runs.remove(&run_id);
            }
            GuardianMsg::CommitFailed(e) => {
                tracing::error!("the Guardian's record of a run could not be stored: {e}");
                state.commit_error = Some(e);
            }
            #[cfg(feature = "fault-injection")]
            GuardianMsg::Panic => panic!("injected fault in the Guardian"),
        }
        Ok(())
    }
}

impl GuardianState {
    /// Applies `change` to the run's watch (read back from the store if this incarnation has
    /// not seen the run), stores the result if it changed, and returns the review.
    fn update(
        &mut self,
        myself: &ActorRef<GuardianMsg>,
        session_id: &SessionId,
        run_id: &RunId,
        change: impl FnOnce(&mut RunWatch) -> Review,
    ) -> Review {
        let mut problems = Vec::new();
        if !self.runs.contains_key(run_id) {
            let watch = match self.store.guardian_watch(run_id) {
                Ok(found) => found.unwrap_or_default(),
                Err(e) => {
                    problems.push(format!(
                        "the Guardian could not read its record of this run ({e}); it watches \
                         the run from here on"
                    ));
                    RunWatch::default()
                }
            };
            self.runs.insert(run_id.clone(), watch);
        }
        let Some(watch) = self.runs.get_mut(run_id) else {
            return Review::default();
        };
        let before = watch.clone();
        let mut review = change(watch);
        if *watch != before {
            let watch = watch.clone();
            self.persist(myself, session_id, run_id, watch);
        }
        if let Some(e) = self.commit_error.take() {
            problems.push(format!("the Guardian's record could not be stored: {e}"));
        }
        for message in problems {
            review.events.insert(0, EventKind::Error { message });
        }
        review
    }

    fn persist(
        &self,
        myself: &ActorRef<GuardianMsg>,
        session_id: &SessionId,
        run_id: &RunId,
        watch: RunWatch,
    ) {
        let mut batch = WriteBatch::new(session_id.clone());
        batch.guardian = Some((run_id.clone(), watch));
        let me = myself.clone();
        let notify = Callback::new(
            move |result: Result<(), StoreError>| {
                if let Err(e) = result {
                    if me.cast(GuardianMsg::CommitFailed(e.to_string())).is_err() {
                        tracing::error!(
                            "a failed write of the Guardian's record found no Guardian"
                        );
                    }
                }
            },
            || Err(crate::checkpoint::writer_gone()),
        );
        let append = CheckpointMsg::Append {
            batch: Box::new(batch),
            notify,
        };
        if let Err(e) = self.checkpoint.cast(append) {
            tracing::error!("handing the Guardian's record to the store failed: {e}");
        }
    }
}
