//! The chat's prompt line: rustyline's editing (arrows, Ctrl-A/E, Ctrl-R search) and the
//! history of what was typed, kept in `$RYVOS_HOME/chat_history` across chats.

use rustyline::error::ReadlineError;
use rustyline::history::DefaultHistory;
use rustyline::{Config, Editor};
use std::path::PathBuf;

/// How many prompts the history keeps.
const HISTORY_LINES: usize = 1000;

/// What reading a line gave.
pub enum Typed {
    Line(String),
    /// Ctrl-C at the prompt.
    Interrupted,
    /// Ctrl-D on an empty line, or the terminal went away.
    Done,
}

/// The line editor, and where its history is kept.
pub struct LineEditor {
    /// Taken while a read blocks its thread.
    editor: Option<Editor<(), DefaultHistory>>,
    history: PathBuf,
}

impl LineEditor {
    /// An editor with the history kept at `history` (read now, if there is one).
    pub fn open(history: PathBuf) -> Result<Self, String> {
        let config = Config::builder()
            .max_history_size(HISTORY_LINES)
            .map_err(|e| e.to_string())?
            .auto_add_history(false)
            .build();
        let mut editor = Editor::with_config(config).map_err(|e| e.to_string())?;
        if history.exists() {
            if let Err(e) = editor.load_history(&history) {
                eprintln!(
                    "ryvos: warning: the chat history {} cannot be read ({e}); starting without it",
                    history.display()
                );
            }
        }
        Ok(Self {
            editor: Some(editor),
            history,
        })
    }

    /// Reads a line after `prompt`, on a blocking thread (the read cannot be cancelled).
    pub async fn read(&mut self, prompt: String) -> Typed {
        let Some(mut editor) = self.editor.take() else {
            return Typed::Done;
        };
        let read = tokio::task::spawn_blocking(move || {
            let line = editor.readline(&prompt);
            (editor, line)
        })
        .await;
        let Ok((editor, line)) = read else {
            return Typed::Done;
        };
        self.editor = Some(editor);
        match line {
            Ok(line) => {
                self.remember(&line);
                Typed::Line(line)
            }
            Err(ReadlineError::Interrupted) => Typed::Interrupted,
            Err(ReadlineError::Eof) => Typed::Done,
            Err(e) => {
                eprintln!("ryvos: the terminal cannot be read: {e}");
                Typed::Done
            }
        }
    }

    /// Adds `line` to the history, and to its file at once: a chat that is killed keeps it.
    fn remember(&mut self, line: &str) {
        let Some(editor) = self.editor.as_mut() else {
            return;
        };
        if line.trim().is_empty() || editor.add_history_entry(line).ok() != Some(true) {
            return;
        }
        if let Err(e) = editor.append_history(&self.history) {
            eprintln!(
                "ryvos: warning: the chat history {} cannot be written: {e}",
                self.history.display()
            );
        }
    }
}
