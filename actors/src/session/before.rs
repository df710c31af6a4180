//! What a run brings from before it began: the time a parked run it goes on as had run, and
//! what it tells the model first; the turns since the session's last prompt, for a run that
//! continues without one. A part of the run's state of its own, with private fields.

use crate::store::RunRecord;
use ryvos_protocol::event::ParkReason;

/// What a run brings from before it began.
#[derive(Default)]
pub(super) struct Before {
    /// The run goes on after it parked: its prompt is in the history already.
    continued: bool,
    /// What a continued run tells the model first, when it parked on an escalation.
    resume_note: Option<String>,
    /// How long the run ran before this stretch.
    active_ms: u64,
    /// Turns taken since the session's last prompt, before the run began: they count against
    /// `max_turns` with its own.
    turns: u32,
}

impl Before {
    /// What the run `parked` left to the run that goes on as it.
    pub(super) fn parked(parked: &RunRecord) -> Self {
        // Its last word was an answer the Judge escalated: it goes on only when told to.
        let resume_note = (parked.park_reason == Some(ParkReason::Escalated)).then(|| {
            "[Judge] A person reviewed the escalation and asks you to go on working toward the \
             goal, then give your final answer again."
                .to_owned()
        });
        Self {
            continued: true,
            resume_note,
            active_ms: parked.active_ms,
            turns: 0,
        }
    }

    /// Whether the run goes on after it parked.
    pub(super) fn is_continue(&self) -> bool {
        self.continued
    }

    /// The prompt the run gives the model, `prompt` being its own: none for a continued run
    /// (its prompt is in the history already) but its note, if it has one.
    pub(super) fn prompt_to_give<'a>(&'a self, prompt: &'a str) -> &'a str {
        match (self.continued, &self.resume_note) {
            (false, _) => prompt,
            (true, Some(note)) => note,
            (true, None) => "",
        }
    }

    /// How long the run ran before this stretch.
    pub(super) fn active_ms(&self) -> u64 {
        self.active_ms
    }

    /// The run continues without a prompt: `turns` were taken since the last one.
    pub(super) fn count_turns_since_prompt(&mut self, turns: u32) {
        self.turns = turns;
    }

    /// The turns that count against `max_turns` before the run's own.
    pub(super) fn turns(&self) -> u32 {
        self.turns
    }
}
