//! The Guardian: the runtime's watchdog over every run.
//!
//! After every turn the session reports the turn's tool calls and the conversation's size; on a
//! timer it reports a stall (no model answer completed, no tool call finished, for
//! `stall_timeout_secs`). The [`GuardianActor`] answers with a [`Review`]: events to publish, a
//! hint to put into the conversation, a silent model call to cut and retry, or a stop. It
//! catches doom loops ([`doom_loop`]), stalls, and the token budget; dollar budgets are the
//! [`crate::cost_ledger`]'s. It never blocks a tool call: it guides, and stops a run only when
//! its hints went unheeded or a hard limit is reached.

mod actor;
pub(crate) mod doom_loop;
mod watch;

pub(crate) use actor::{GuardianActor, GuardianArgs};
pub(crate) use doom_loop::CallReport;
pub(crate) use watch::{Hint, Review, Thresholds, TurnReport};

use crate::event::StallPhase;
use crate::ids::RunId;
use ractor::RpcReplyPort;
use std::time::Duration;

/// Messages of the [`GuardianActor`].
pub(crate) enum GuardianMsg {
    /// A turn finished; what should happen before the next model call?
    ReviewTurn {
        run_id: RunId,
        report: TurnReport,
        /// The run's first turn: nothing of the run is stored yet, so there is no record of
        /// it to read back (a round trip saved on a shared store).
        first: bool,
        reply: RpcReplyPort<Review>,
    },
    /// The run made no progress for `silent_for` while in `phase` (running `tools`).
    Stalled {
        run_id: RunId,
        phase: StallPhase,
        silent_for: Duration,
        tools: Vec<String>,
        reply: RpcReplyPort<Review>,
    },
    /// The run ended: forget it.
    RunEnded { run_id: RunId },
    /// Test hook: panic inside the handler.
    #[cfg(feature = "testing")]
    Panic,
}
