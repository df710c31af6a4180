//! The run's model call: the models it asks, the call in flight (its cancel and heartbeat),
//! and what the turn's call has met so far (a window it was asked with and counted, losses
//! and overflows). A part of the run's state of its own,
//! with private fields.

use super::history::Mark;
use crate::llm_stream::{Heartbeat, ModelChain};
use crate::provider::EncodedPrefix;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The run's model call.
pub(super) struct ModelCall {
    /// The models the run asks, its chosen one first.
    models: Arc<ModelChain>,
    /// The call in flight: a child of the run's cancel, so a stalled call can be cut alone.
    cancel: CancellationToken,
    /// When the call in flight last streamed, or the tools in flight were dispatched.
    heartbeat: Heartbeat,
    /// What the run's last model call encoded, for the next one to go on from.
    encoded: Arc<EncodedPrefix>,
    /// Times the model refused the current turn's request as too large (room was made each
    /// time).
    overflows: u32,
    /// Ryvos's exact count of the request being answered, when it had one: the server's count
    /// of it teaches how the server counts.
    counted: Option<u64>,
    /// This turn's call was lost with its actor and asked again this many times.
    lost: u32,
    /// The window the turn's call was asked with, which its reported input measures.
    asked_with: Mark,
}

impl ModelCall {
    /// Asking `models`, no call yet made; a call is a child of `run_cancel`.
    pub(super) fn new(models: Arc<ModelChain>, run_cancel: &CancellationToken) -> Self {
        Self {
            models,
            cancel: run_cancel.child_token(),
            heartbeat: Heartbeat::new(),
            encoded: Arc::default(),
            overflows: 0,
            counted: None,
            lost: 0,
            asked_with: Mark::default(),
        }
    }

    /// The models the run asks.
    pub(super) fn models(&self) -> &Arc<ModelChain> {
        &self.models
    }

    /// The model the run asks first.
    pub(super) fn model(&self) -> &str {
        self.models.model()
    }

    /// What the last call encoded, for the next to go on from.
    pub(super) fn encoded(&self) -> Arc<EncodedPrefix> {
        self.encoded.clone()
    }

    /// A new call begins, a child of `run_cancel`: its cancel and its heartbeat.
    pub(super) fn start(
        &mut self,
        run_cancel: &CancellationToken,
    ) -> (CancellationToken, Heartbeat) {
        self.cancel = run_cancel.child_token();
        self.heartbeat = Heartbeat::new();
        (self.cancel.clone(), self.heartbeat.clone())
    }

    /// Cuts the call in flight.
    pub(super) fn cut(&self) {
        self.cancel.cancel();
    }

    /// When the call (or the tools) in flight last showed life.
    pub(super) fn heartbeat(&self) -> &Heartbeat {
        &self.heartbeat
    }

    /// The turn's call is asked with window `with`, which Ryvos counted `counted` exactly
    /// (when it could).
    pub(super) fn asked(&mut self, counted: Option<u64>, with: Mark) {
        self.counted = counted;
        self.asked_with = with;
    }

    /// Ryvos's exact count of the request being answered, if it had one.
    pub(super) fn counted(&self) -> Option<u64> {
        self.counted
    }

    /// The count, taken: it teaches once.
    pub(super) fn take_counted(&mut self) -> Option<u64> {
        self.counted.take()
    }

    /// The window the turn's call was asked with.
    pub(super) fn asked_with(&self) -> Mark {
        self.asked_with
    }

    /// The call was lost with its actor; how many times this turn's has been.
    pub(super) fn lost(&mut self) -> u32 {
        self.lost += 1;
        self.lost
    }

    /// How many times this turn's call has been lost.
    pub(super) fn losses(&self) -> u32 {
        self.lost
    }

    /// The model refused the request as too large; how many times this turn's has been.
    pub(super) fn overflowed(&mut self) -> u32 {
        self.overflows += 1;
        self.overflows
    }

    /// The turn's call was answered: its losses and overflows are forgotten.
    pub(super) fn answered(&mut self) {
        self.overflows = 0;
        self.lost = 0;
    }
}
