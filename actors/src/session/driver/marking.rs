//! The points a rewind can go back to: the session as the run found it, and as each turn left
//! it — where the conversation's window stood, and a snapshot of the workspace's files, taken
//! after every turn whose calls ran (whatever they changed, commands included).

use super::Driver;
use ryvos_protocol::records::RewindPoint;

impl Driver {
    /// The session as the run finds it, before its prompt: kept on the run's record. A
    /// continued run keeps the point it started from, and takes the files as it finds them
    /// for its next turns.
    pub(super) async fn mark_start(&mut self) {
        self.snapshot_workspace().await;
        if self.run.before().is_continue() {
            return;
        }
        let upto = self.session.history.next_seq();
        let point = self.point(upto);
        self.run.points_mut().start = Some(point);
    }

    /// Snapshots the workspace after calls ran in it, when `[rewind] enabled`.
    pub(super) async fn snapshot_workspace(&mut self) {
        let snapshots = &self.session.services.snapshots;
        if !snapshots.enabled() {
            return;
        }
        let root = self.run.workspace().root().to_path_buf();
        let mark = snapshots.take_async(root).await;
        if let Some(why) = &mark.unkept {
            // Said once per reason, not every turn.
            if self
                .run
                .points()
                .workspace
                .as_ref()
                .and_then(|m| m.unkept.as_ref())
                != Some(why)
            {
                self.run.events().emit(crate::event::EventKind::Warning {
                    message: format!("rewinding to this point will be refused: {why}"),
                });
            }
        }
        self.run.points_mut().workspace = Some(mark);
    }

    /// The session now, with its messages before `upto`, as a rewind would restore it.
    pub(super) fn point(&self, upto: u64) -> RewindPoint {
        let (window_from, summary) = self.session.history.window();
        let summary = summary.and_then(|text| {
            (self.session.services.snapshots.put_text(text))
                .inspect_err(|e| tracing::warn!("the summary was not kept for rewinds: {e}"))
                .ok()
        });
        RewindPoint {
            window_from,
            upto,
            summary,
            workspace: self.run.points().workspace.clone(),
        }
    }
}
