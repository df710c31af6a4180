//! Completion callbacks that are always answered.
//!
//! Work handed to another actor carries a [`Callback`] for its result. If the work is lost
//! instead (the actor died with it in its mailbox, a task panicked), dropping the callback
//! answers with a fallback that says so, so the one waiting is never left waiting.

/// A one-shot callback with an answer for the case it is dropped unanswered.
pub(crate) struct Callback<T> {
    call: Option<Box<dyn FnOnce(T) + Send>>,
    if_dropped: Option<Box<dyn FnOnce() -> T + Send>>,
}

impl<T> Callback<T> {
    /// `call` receives the result; `if_dropped` makes one if the callback is dropped unanswered.
    pub(crate) fn new(
        call: impl FnOnce(T) + Send + 'static,
        if_dropped: impl FnOnce() -> T + Send + 'static,
    ) -> Self {
        Self {
            call: Some(Box::new(call)),
            if_dropped: Some(Box::new(if_dropped)),
        }
    }

    /// The same callback with another answer for the case it is dropped: the work has moved
    /// on, and losing it now means something else.
    pub(crate) fn if_dropped(mut self, if_dropped: impl FnOnce() -> T + Send + 'static) -> Self {
        self.if_dropped = Some(Box::new(if_dropped));
        self
    }

    /// Answers with `value`.
    pub(crate) fn answer(mut self, value: T) {
        if let Some(call) = self.call.take() {
            call(value);
        }
    }
}

impl<T> Drop for Callback<T> {
    fn drop(&mut self) {
        if let (Some(call), Some(if_dropped)) = (self.call.take(), self.if_dropped.take()) {
            call(if_dropped());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn answered_once_either_way() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        Callback::new(move |v| g.lock().unwrap().push(v), || 0).answer(7);
        let g = got.clone();
        drop(Callback::new(move |v| g.lock().unwrap().push(v), || -1));
        assert_eq!(*got.lock().unwrap(), vec![7, -1]);
    }
}
