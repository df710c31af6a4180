//! Taking a session back to a point, or forking it there, for every door: the socket, the
//! console, ACP and the CLI without a daemon.

use super::{Runtime, RuntimeError};
use ryvos_actors::RewindTo;
use ryvos_protocol::ids::{RunId, SessionId};
use ryvos_protocol::records::TurnCheckpoint;
use ryvos_protocol::socket::{ForkParams, ForkResult, HistoryTurn, RewindParams, RewindResult};

impl Runtime {
    /// Takes a session back to the point `params` names: its conversation's window and its
    /// workspace's files. Refused while a run is in flight on it.
    pub async fn rewind(&self, params: RewindParams) -> Result<RewindResult, RuntimeError> {
        let id = SessionId::new(&params.session);
        let to = match (params.turn, params.run, params.undo) {
            (Some(turn), None, false) => RewindTo::Turn(turn),
            (None, Some(run), false) => RewindTo::BeforeRun(RunId::new(run)),
            (None, None, true) => RewindTo::Undo,
            _ => return Err(one_point("rewind", "`turn`, `run` or `undo`")),
        };
        let rewound = self.engine.rewind(&id, to).await?;
        Ok(RewindResult {
            session_id: id.to_string(),
            to: rewound.label,
            window_messages: rewound.window_messages,
            workspace: rewound.workspace,
            files_written: rewound.files_written as u64,
            files_removed: rewound.files_removed as u64,
            not_undone: rewound.not_undone,
        })
    }

    /// A new session from the point `params` names, working in a copy of the files as they
    /// were then.
    pub async fn fork(&self, params: ForkParams) -> Result<ForkResult, RuntimeError> {
        let id = SessionId::new(&params.session);
        let at = match (params.turn, params.run) {
            (Some(turn), None) => RewindTo::Turn(turn),
            (None, Some(run)) => RewindTo::BeforeRun(RunId::new(run)),
            _ => return Err(one_point("fork", "`turn` or `run`")),
        };
        let into = params.workspace.map(std::path::PathBuf::from);
        if into.as_ref().is_some_and(|dir| dir.is_relative()) {
            return Err(RuntimeError::BadRequest(
                "a fork's workspace must be an absolute path".into(),
            ));
        }
        let forked = self.engine.fork(&id, at, into).await?;
        Ok(ForkResult {
            session_id: forked.session_id.to_string(),
            forked_from: id.to_string(),
            at: forked.label,
            workspace: forked.workspace.display().to_string(),
            files: forked.files as u64,
        })
    }
}

fn one_point(call: &str, which: &str) -> RuntimeError {
    RuntimeError::BadRequest(format!("a {call} names exactly one of {which}"))
}

/// The session's turns from its checkpoints (oldest first), numbered as `rewind --turn`
/// takes them.
pub(super) fn numbered(checkpoints: Vec<TurnCheckpoint>) -> Vec<HistoryTurn> {
    (1..)
        .zip(checkpoints)
        .map(|(turn, c)| {
            let mark = c.point.as_ref().map(|p| p.workspace.as_ref());
            let not_rewindable = match mark {
                None => Some("stored before rewind points were recorded".to_owned()),
                Some(None) => Some("no snapshot of the files ([rewind] enabled = false)".into()),
                Some(Some(mark)) => mark.unkept.clone(),
            };
            HistoryTurn {
                turn,
                run_id: c.run_id,
                run_turn: c.turn,
                last_seq: c.last_seq,
                not_rewindable,
            }
        })
        .collect()
}
