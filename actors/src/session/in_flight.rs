//! The runs in flight, kept by the session supervisor: how many (a daemon claims from the run
//! queue only what room is left) and which (`status` lists them).

use crate::ids::{RunId, SessionId};
use ryvos_protocol::socket::RunInFlight;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The longest prompt kept for a run's listing, in characters.
const PROMPT_CHARS: usize = 80;

/// The runs in flight, readable outside the supervisor.
#[derive(Clone, Debug, Default)]
pub(crate) struct RunsInFlight(Arc<Mutex<HashMap<RunId, RunInFlight>>>);

impl RunsInFlight {
    pub(crate) fn count(&self) -> usize {
        self.lock().len()
    }

    /// The runs in flight, the oldest first.
    pub(crate) fn list(&self) -> Vec<RunInFlight> {
        let mut runs: Vec<RunInFlight> = self.lock().values().cloned().collect();
        runs.sort_by(|a, b| (a.started_at_ms, &a.run_id).cmp(&(b.started_at_ms, &b.run_id)));
        runs
    }

    /// How run `run` of `session`, starting now on `prompt`, is listed (its prompt's first
    /// line, at most [`PROMPT_CHARS`] of it, kept).
    pub(super) fn listing(run: &RunId, session: &SessionId, prompt: &str) -> RunInFlight {
        let first_line = prompt.lines().next().unwrap_or_default();
        let prompt = match first_line.char_indices().nth(PROMPT_CHARS) {
            Some((at, _)) => format!("{}…", &first_line[..at]),
            None => first_line.to_owned(),
        };
        RunInFlight {
            run_id: run.clone(),
            session_id: session.clone(),
            started_at_ms: crate::store::now_ms(),
            prompt,
        }
    }

    pub(super) fn add(&self, listed: RunInFlight) {
        self.lock().insert(listed.run_id.clone(), listed);
    }

    pub(super) fn remove(&self, run: &RunId) {
        self.lock().remove(run);
    }

    pub(super) fn reset(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, RunInFlight>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
