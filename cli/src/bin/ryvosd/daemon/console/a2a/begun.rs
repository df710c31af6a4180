//! The tasks begun here whose runs may not be stored yet: a task answered at once
//! (`returnImmediately`) is asked about before its run's record is durable, and is then told
//! as working rather than as missing.

use a2a::Task;
use std::collections::HashMap;
use std::sync::Mutex;

/// The most tasks kept: a run in flight is stored within moments, so only a burst of sends
/// comes near it; past it all are forgotten (a forgotten task is told from the store once its
/// run is stored, and is missing only until then).
const KEPT: usize = 1024;

#[derive(Default)]
pub(crate) struct Begun {
    tasks: Mutex<HashMap<String, Task>>,
}

impl Begun {
    fn tasks(&self) -> std::sync::MutexGuard<'_, HashMap<String, Task>> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `task`, just begun.
    pub(super) fn keep(&self, task: &Task) {
        let mut tasks = self.tasks();
        if tasks.len() >= KEPT {
            tasks.clear();
        }
        tasks.insert(task.id.clone(), task.clone());
    }

    /// The task `id` as it was begun, if it was begun here and is not stored yet.
    pub(super) fn get(&self, id: &str) -> Option<Task> {
        self.tasks().get(id).cloned()
    }

    /// Task `id` is stored: the store tells it from now on.
    pub(super) fn stored(&self, id: &str) {
        self.tasks().remove(id);
    }
}
