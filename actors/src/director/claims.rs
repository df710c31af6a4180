//! Which sessions a Director is running on: one Director per session at a time, each with the
//! signal that stops it, so `cancel` and `interrupt` of that session reach the Director.

use super::StopSignal;
use crate::event::RunStatus;
use crate::ids::SessionId;
use std::collections::HashMap;
use std::sync::Arc;

/// A session held by its Director until the guard is dropped.
pub(crate) struct Directing {
    sessions: Directors,
    session: SessionId,
}

/// The sessions a Director is running on, each with the signal that stops it.
pub(crate) type Directors = Arc<std::sync::Mutex<HashMap<SessionId, StopSignal>>>;

impl Directing {
    /// Holds `session`, unless a Director already does; with the signal that stops its run.
    pub(crate) fn claim(sessions: &Directors, session: &SessionId) -> Option<(Self, StopSignal)> {
        let mut held = sessions.lock().unwrap_or_else(|e| e.into_inner());
        if held.contains_key(session) {
            return None;
        }
        let stop = StopSignal::default();
        held.insert(session.clone(), stop.clone());
        let claim = Self {
            sessions: sessions.clone(),
            session: session.clone(),
        };
        Some((claim, stop))
    }

    /// Asks the Director on `session`, if there is one, to stop; whether there was.
    pub(crate) fn stop(
        sessions: &Directors,
        session: &SessionId,
        status: RunStatus,
        reason: &str,
    ) -> bool {
        let held = sessions.lock().unwrap_or_else(|e| e.into_inner());
        let Some(signal) = held.get(session) else {
            return false;
        };
        signal.stop(status, reason);
        true
    }

    pub(crate) fn session(&self) -> &SessionId {
        &self.session
    }
}

impl Drop for Directing {
    fn drop(&mut self) {
        let mut held = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        held.remove(&self.session);
    }
}
