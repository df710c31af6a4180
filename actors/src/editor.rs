//! A run's files as its editor holds them. A run started by an editor that can read and write
//! files for it (ACP's `fs/read_text_file`, `fs/write_text_file`) has its file tools go
//! through the editor: a read sees unsaved buffers, a write shows in the editor. The tool
//! still resolves the path in the workspace and checks the gate's rules first; then it emits
//! [`EventKind::FileRequested`] and waits for whoever follows the run to answer
//! ([`EditorRequests::answer`]). An editor that does not answer within [`PATIENCE`] is taken to
//! be gone: that call and the run's later ones use the disk, as a run without an editor does.

use crate::event::RunEvents;
use ryvos_protocol::event::EventKind;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// How long an editor may take to answer before the run stops asking it.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// What an editor answers: a read's text (`None` for a write), or why it could not.
pub type EditorAnswer = Result<Option<String>, String>;

/// The file requests waiting for an editor's answer, across every run. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct EditorRequests {
    waiting: Arc<Mutex<HashMap<String, oneshot::Sender<EditorAnswer>>>>,
    made: Arc<AtomicU64>,
}

impl EditorRequests {
    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<EditorAnswer>>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answers request `request_id`; whether one was waiting (not answered, timed out or
    /// ended with its run).
    pub(crate) fn answer(&self, request_id: &str, answer: EditorAnswer) -> bool {
        let waiting = self.waiting().remove(request_id);
        waiting.is_some_and(|asked| asked.send(answer).is_ok())
    }

    /// The editor of a run emitting to `events`, its calls cancelled by `cancel`.
    pub(crate) fn editor(&self, events: RunEvents, cancel: CancellationToken) -> Editor {
        Editor {
            requests: self.clone(),
            events,
            cancel,
            gone: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// A run's editor, as its file tools ask it. Cheap to clone.
#[derive(Clone)]
pub struct Editor {
    requests: EditorRequests,
    events: RunEvents,
    cancel: CancellationToken,
    /// Set once it did not answer: the run uses the disk from then on.
    gone: Arc<AtomicBool>,
}

impl Editor {
    /// The text of `path` as the editor has it; `None` when the editor is gone (use the disk);
    /// why the call fails (the editor could not read it, or the run stopped).
    pub async fn read(&self, path: &Path) -> Result<Option<String>, String> {
        self.ask(path, None).await
    }

    /// Writes `content` to `path` through the editor; `false` when it is gone (use the disk);
    /// why the call fails.
    pub async fn write(&self, path: &Path, content: &str) -> Result<bool, String> {
        Ok(self.ask(path, Some(content.to_owned())).await?.is_some())
    }

    /// Asks the editor to read `path` (`write` `None`) or write it; `None` when it is gone.
    async fn ask(&self, path: &Path, write: Option<String>) -> Result<Option<String>, String> {
        if self.gone.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let n = self.requests.made.fetch_add(1, Ordering::Relaxed) + 1;
        let request_id = format!("f_{}_{n}", self.events.run_id());
        let (asked, answered) = oneshot::channel();
        self.requests.waiting().insert(request_id.clone(), asked);
        let writes = write.is_some();
        self.events.emit(EventKind::FileRequested {
            request_id: request_id.clone(),
            path: path.display().to_string(),
            content: write,
        });
        let answer = tokio::select! {
            answer = tokio::time::timeout(PATIENCE, answered) => answer,
            () = self.cancel.cancelled() => {
                self.requests.waiting().remove(&request_id);
                return Err("the run stopped".into());
            }
        };
        let doing = if writes { "write" } else { "read" };
        match answer {
            Ok(Ok(Ok(text))) => Ok(Some(text.unwrap_or_default())),
            Ok(Ok(Err(why))) => Err(format!(
                "the editor could not {doing} {}: {why}",
                path.display()
            )),
            // Unanswered: the editor is gone (closed, or its connection lost).
            Ok(Err(_)) | Err(_) => {
                self.requests.waiting().remove(&request_id);
                self.gone.store(true, Ordering::Relaxed);
                self.events.emit(EventKind::Warning {
                    message: format!(
                        "the editor did not answer a file {doing} within {PATIENCE:?}: the \
                         run's file tools use the disk from now on"
                    ),
                });
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::SessionEvents;
    use crate::ids::{RunId, SessionId};
    use ryvos_protocol::event::Event;
    use tokio::sync::broadcast;

    fn editor() -> (EditorRequests, Editor, broadcast::Receiver<Arc<Event>>) {
        let session = SessionEvents::new(Default::default());
        let events = session.subscribe();
        let run = session.for_run(SessionId::new("s_1"), RunId::new("r_1"));
        let requests = EditorRequests::default();
        let editor = requests.editor(run, CancellationToken::new());
        (requests, editor, events)
    }

    /// Answers the next file request with `answer`; what it asked (path, content to write).
    async fn answering(
        events: &mut broadcast::Receiver<Arc<Event>>,
        requests: &EditorRequests,
        answer: EditorAnswer,
    ) -> (String, Option<String>) {
        loop {
            if let EventKind::FileRequested {
                request_id,
                path,
                content,
            } = &events.recv().await.unwrap().kind
            {
                assert!(requests.answer(request_id, answer));
                assert!(!requests.answer(request_id, Ok(None)), "answered once");
                return (path.clone(), content.clone());
            }
        }
    }

    #[tokio::test]
    async fn the_editor_is_asked_and_its_answer_or_refusal_is_the_tools() {
        let (requests, editor, mut events) = editor();
        let path = Path::new("/w/a.txt");
        let (read, asked) = tokio::join!(
            editor.read(path),
            answering(&mut events, &requests, Ok(Some("buffer".into())))
        );
        assert_eq!(read.unwrap().as_deref(), Some("buffer"));
        assert_eq!(asked, ("/w/a.txt".into(), None));
        let (wrote, asked) = tokio::join!(
            editor.write(path, "new"),
            answering(&mut events, &requests, Ok(None))
        );
        assert!(wrote.unwrap());
        assert_eq!(asked.1.as_deref(), Some("new"));
        let (refused, _) = tokio::join!(
            editor.read(path),
            answering(&mut events, &requests, Err("no such file".into()))
        );
        let refused = refused.unwrap_err();
        assert!(refused.contains("no such file"), "{refused}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_editor_that_does_not_answer_is_gone_and_the_run_uses_the_disk() {
        let (requests, editor, mut events) = editor();
        let path = Path::new("/w/a.txt");
        assert_eq!(editor.read(path).await.unwrap(), None);
        assert!(requests.waiting().is_empty(), "the request is forgotten");
        let said: Vec<_> = std::iter::from_fn(|| events.try_recv().ok()).collect();
        assert!(said.iter().any(
            |e| matches!(&e.kind, EventKind::Warning { message } if message.contains("disk"))
        ));
        // Not asked again: the next call uses the disk at once.
        assert!(!editor.write(path, "x").await.unwrap());
        assert!(events.try_recv().is_err());
    }
}
