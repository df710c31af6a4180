//! The run's system prompt as the model gets it: the base (principles, context files, recalled
//! memories), then, for a goal-driven run, the goal's focus layer; and its size, which the
//! token budget counts with the conversation. A part of the run's state of its own, with
//! private fields.

use crate::judge::Goal;
use crate::tokens::Size;
use std::sync::Arc;

/// The run's system prompt.
pub(super) struct SystemPrompt {
    /// As the model gets it: `base`, then the focus layer.
    text: Arc<str>,
    /// Without the focus layer.
    base: Arc<str>,
    /// The size of `text`: counted, or bounded.
    size: Size,
}

impl Default for SystemPrompt {
    fn default() -> Self {
        let empty: Arc<str> = Arc::from("");
        Self {
            size: crate::tokens::size_text(&empty),
            base: empty.clone(),
            text: empty,
        }
    }
}

impl SystemPrompt {
    /// The prompt is `base`, with `goal`'s focus layer after it (where nothing was evaluated
    /// yet).
    pub(super) fn set(&mut self, base: Arc<str>, goal: Option<&Goal>) {
        self.base = base;
        self.text = self.base.clone();
        self.size = crate::tokens::size_text(&self.text);
        self.refocus(goal, None);
    }

    /// Rewrites `goal`'s focus layer with where the evaluation stands (`status`).
    pub(super) fn refocus(&mut self, goal: Option<&Goal>, status: Option<&str>) {
        if let Some(goal) = goal {
            let focus = crate::judge::goal::focus(goal, status);
            let text = format!("{}\n\n{focus}", self.base);
            self.size = crate::tokens::size_text(&text);
            self.text = text.into();
        }
    }

    /// The prompt as the model gets it.
    pub(super) fn text(&self) -> &Arc<str> {
        &self.text
    }

    /// Its size, counted or bounded.
    pub(super) fn size(&self) -> Size {
        self.size
    }

    /// Counts its size exactly (it may have been bounded only).
    pub(super) fn count_exactly(&mut self) {
        self.size = Size::Counted(crate::tokens::count_text(&self.text));
    }
}
