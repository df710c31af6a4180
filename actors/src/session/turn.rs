//! The turn in progress: where it began in the history, what its model call used, and its
//! calls while they are in flight. A part of the run's state of its own, changed only
//! through these methods.

use crate::message::ToolCall;
use crate::provider::Usage;

/// The calls of a turn between the model's answer and their results: what a run that ends
/// meanwhile answers for them.
pub(super) enum CallsInFlight {
    /// Waiting until the turn that asked for them is durable: none has started.
    AwaitingDurability(Vec<ToolCall>),
    /// Running.
    Running(Vec<ToolCall>),
}

/// The turn in progress: what it appended, what its model call used, and its calls.
pub(super) struct TurnInProgress {
    /// The seq of the turn's first message.
    first_seq: u64,
    usage: Usage,
    /// The latest answer stopped at the output limit: its cut-off calls do not run, and a
    /// final answer is reported truncated.
    answer_cut: bool,
    /// The turn's calls, from the answer that asked for them until their results are
    /// appended.
    in_flight: Option<CallsInFlight>,
}

impl TurnInProgress {
    /// A turn whose first message will take `first_seq`.
    pub(super) fn starting_at(first_seq: u64) -> Self {
        Self {
            first_seq,
            usage: Usage::default(),
            answer_cut: false,
            in_flight: None,
        }
    }

    /// The next turn begins with message `seq` (see `Driver::begin_turn`, its one caller).
    pub(super) fn begin_at(&mut self, seq: u64) {
        self.first_seq = seq;
    }

    /// The seq of the turn's first message.
    pub(super) fn first_seq(&self) -> u64 {
        self.first_seq
    }

    /// The turn's model call answered, using `usage`.
    pub(super) fn answered(&mut self, usage: Usage) {
        self.usage = usage;
    }

    /// What the turn's model call used.
    pub(super) fn usage(&self) -> Usage {
        self.usage
    }

    /// Whether the answer stopped at the output limit, as now known.
    pub(super) fn cut_at_output_limit(&mut self, cut: bool) {
        self.answer_cut = cut;
    }

    /// Whether the latest answer stopped at the output limit.
    pub(super) fn answer_cut(&self) -> bool {
        self.answer_cut
    }

    /// The turn's calls, now in flight as `calls` says.
    pub(super) fn calls(&mut self, calls: CallsInFlight) {
        self.in_flight = Some(calls);
    }

    /// Every call that ran has its result.
    pub(super) fn calls_answered(&mut self) {
        self.in_flight = None;
    }

    /// The calls still in flight, taken to be answered as the run ends.
    pub(super) fn take_calls(&mut self) -> Option<CallsInFlight> {
        self.in_flight.take()
    }
}
