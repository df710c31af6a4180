//! GuardianActor: holds each run's [`RunWatch`] and answers reviews and stalls. Each changed
//! watch goes back with the review and is stored by the session with its turn; a restarted
//! Guardian reads a run's watch back from redb when the run is next mentioned.

use super::watch::{Ladder, Review, RunWatch, Thresholds};
use super::GuardianMsg;
use crate::checkpoint::Checkpoint;
use crate::event::EventKind;
use crate::ids::RunId;
use crate::store::Store;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::collections::HashMap;

/// What the Guardian is started with.
#[derive(Clone)]
pub(crate) struct GuardianArgs {
    pub store: Store,
    pub checkpoint: Checkpoint,
    pub thresholds: Thresholds,
}

/// The actor; see the module documentation of [`crate::guardian`].
pub(crate) struct GuardianActor;

/// Its state.
pub(crate) struct GuardianState {
    store: Store,
    checkpoint: Checkpoint,
    thresholds: Thresholds,
    runs: HashMap<RunId, RunWatch>,
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
        })
    }

    /// Runs are read back from the store when first mentioned; first every write of a previous
    /// incarnation is let land.
    async fn post_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        Ok(crate::checkpoint::flush(&state.checkpoint).await?)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            GuardianMsg::ReviewTurn {
                run_id,
                report,
                first,
                reply,
            } => {
                let thresholds = state.thresholds.clone();
                let review = state
                    .update(&run_id, !first, |w| w.review(&thresholds, &report))
                    .await;
                if reply.send(review).is_err() {
                    tracing::debug!(run = %run_id, "a review's caller left");
                }
            }
            GuardianMsg::Stalled {
                run_id,
                phase,
                silent_for,
                tools,
                reply,
            } => {
                let review = state
                    .update(&run_id, true, |w| w.stalled(phase, silent_for, &tools))
                    .await;
                if reply.send(review).is_err() {
                    tracing::debug!(run = %run_id, "a stall report's caller left");
                }
            }
            GuardianMsg::RunEnded { run_id } => {
                state.runs.remove(&run_id);
            }
            #[cfg(feature = "testing")]
            GuardianMsg::Panic => panic!("injected fault in the Guardian"),
        }
        Ok(())
    }
}

impl GuardianState {
    /// Applies `change` to the run's watch (read back from the store if this incarnation has
    /// not seen the run and it `may_be_stored`) and returns the review, carrying the watch if
    /// it changed.
    async fn update(
        &mut self,
        run_id: &RunId,
        may_be_stored: bool,
        change: impl FnOnce(&mut RunWatch) -> Review,
    ) -> Review {
        let mut unreadable = None;
        if !self.runs.contains_key(run_id) {
            let read = match may_be_stored {
                true => self.store.guardian_watch(run_id).await,
                false => Ok(None),
            };
            let watch = match read {
                Ok(found) => found.unwrap_or_default(),
                Err(e) => {
                    unreadable = Some(format!(
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
            review.watch = Some(watch.clone());
        }
        if let Some(message) = unreadable {
            review.events.insert(0, EventKind::Error { message });
        }
        review
    }
}
