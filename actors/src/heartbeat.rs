//! A sign of life, shared: when something last showed it, on a monotonic clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// When something last showed life: a model call (a delta arrived), for the Guardian's stall
/// detection, or the tokenizer (a count), to let it go when idle. Shared between what beats
/// it and what reads it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Heartbeat(Arc<AtomicU64>);

impl Heartbeat {
    /// A heartbeat that beats now.
    pub(crate) fn new() -> Self {
        let heartbeat = Self::default();
        heartbeat.beat();
        heartbeat
    }

    /// Records a sign of life now.
    pub(crate) fn beat(&self) {
        self.0.store(Self::now_ms(), Ordering::Relaxed);
    }

    /// Counts as alive for `wait` from now: a wait the call chose is no stall.
    pub(crate) fn quiet_for(&self, wait: Duration) {
        let until = Self::now_ms().saturating_add(wait.as_millis() as u64);
        self.0.fetch_max(until, Ordering::Relaxed);
    }

    /// How long since the last sign of life.
    pub(crate) fn silent_for(&self) -> Duration {
        Duration::from_millis(Self::now_ms().saturating_sub(self.0.load(Ordering::Relaxed)))
    }

    /// Milliseconds on a monotonic clock started with the process.
    fn now_ms() -> u64 {
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_millis() as u64
    }
}
