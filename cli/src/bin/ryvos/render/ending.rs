//! How a run's end is told: what it took, how it ended, and what goes on with its session.

use super::Renderer;
use crate::style::{paint, QUIET};
use ryvos::RunStatus;

impl Renderer {
    /// Reports on stderr how the run ended, its session, and the command that continues it.
    pub fn finish(&mut self, status: RunStatus, reason: Option<&str>, session: &str) {
        self.clear_spinner();
        self.waiting = None;
        self.running.clear();
        self.end_line();
        if let (Some(summary), false) = (self.summary.take(), self.quiet || self.json) {
            note!("{}", paint(QUIET, &summary.line()));
        }
        let why = match reason {
            // Said just above, as the error it was.
            Some(r) if self.last_error.as_deref() == Some(r) => " (the error above)".to_owned(),
            Some(r) => format!(": {r}"),
            None => String::new(),
        };
        if self.quiet && status == RunStatus::Completed {
            return;
        }
        if status == RunStatus::Parked {
            // Said as it parked.
            return;
        }
        if self.in_chat {
            match status {
                RunStatus::Completed => {}
                _ if status.pauses() => {
                    note!("ryvos: the run paused ({status}{why}); your next prompt goes on with it")
                }
                _ => note!("ryvos: the run ended with status {status}{why}"),
            }
            return;
        }
        if status == RunStatus::Completed {
            note!(
                "ryvos: session {session}; continue it with `ryvos run --resume {session} \
                 \"<next prompt>\"` (or `ryvos run --continue ...` here)"
            );
        } else if status == RunStatus::MaxTurns {
            // Without a prompt the turns since the last one still count: it would pause again.
            note!(
                "ryvos: the run paused with status {status}{why}; a new prompt goes on with a \
                 new count of turns: `ryvos run --resume {session} \"<next prompt>\"` (or \
                 raise --max-turns)"
            );
        } else if status.pauses() {
            note!(
                "ryvos: the run paused with status {status}{why}; go on with `ryvos run --resume \
                 {session}`"
            );
        } else {
            note!(
                "ryvos: the run ended with status {status}{why}; session {session}: `ryvos run \
                 --resume {session} \"<next prompt>\"` continues it"
            );
        }
    }
}
