//! How the run hands what it appended to the store: its turns, its record, the Judge's
//! verdicts and the Guardian's view of it, in one batch each time.

use super::Driver;
use crate::store::{now_ms, RunRecord, TurnCheckpoint, Write, WriteBatch};

impl Driver {
    /// Hands what the session appended, and the given records, to the store.
    pub(super) fn submit(&mut self, checkpoint: Option<TurnCheckpoint>, run: Option<RunRecord>) {
        let session = &mut self.session;
        let mut batch = WriteBatch::new(session.id.clone());
        let messages = session.history.take_unsubmitted();
        let compaction = session.history.take_compaction();
        // After a failed commit the store refuses messages past what it lost, and the session
        // reloads from it before its next run: only the records go.
        if !session.needs_reload {
            batch
                .writes
                .extend(messages.into_iter().map(Write::Message));
            batch.writes.extend(checkpoint.map(Write::Checkpoint));
            batch.writes.extend(compaction.map(Write::Compaction));
        }
        let ended = run.as_ref().is_some_and(|r| r.status.is_some());
        batch.writes.extend(run.map(Write::Run));
        let active = &mut self.run;
        let verdicts = active.oversight_mut().take_verdicts();
        batch
            .writes
            .extend(verdicts.into_iter().map(Write::Verdict));
        let run_id = active.id().clone();
        if ended {
            // The Guardian's view of a finished run is not needed again.
            batch.push(Write::Watch {
                run_id,
                watch: None,
            });
        } else if let Some(watch) = active.oversight_mut().take_watch() {
            batch.push(Write::Watch {
                run_id,
                watch: Some(watch),
            });
        }
        session.submit_batch(batch);
    }

    /// Stores what the turn in progress appended (its checkpoint, with `tools_called`), and
    /// `run`'s record when given; the next turn begins with the next message.
    pub(super) fn close_turn(&mut self, tools_called: Vec<String>, run: Option<RunRecord>) {
        let checkpoint = self.turn_checkpoint(tools_called);
        self.submit(checkpoint, run);
        self.begin_turn();
    }

    /// The turn in progress begins with the next message appended: the one place a turn's
    /// boundary is set.
    pub(super) fn begin_turn(&mut self) {
        self.run
            .turn_mut()
            .begin_at(self.session.history.next_seq());
    }

    /// The checkpoint of the turn in progress, if it appended anything.
    pub(super) fn turn_checkpoint(&self, tools_called: Vec<String>) -> Option<TurnCheckpoint> {
        let run = &self.run;
        let next = self.session.history.next_seq();
        (next > run.turn().first_seq()).then(|| TurnCheckpoint {
            run_id: run.id().clone(),
            turn: run.turns(),
            first_seq: run.turn().first_seq(),
            last_seq: next - 1,
            tools_called,
            input_tokens: run.turn().usage().input_tokens,
            output_tokens: run.turn().usage().output_tokens,
            context_tokens: self.context_tokens(),
            at_ms: now_ms(),
            point: Some(self.point(next)),
        })
    }
}
