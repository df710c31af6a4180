//! When to restart a failed actor, and when to give up: OTP-style restart intensity with
//! exponential backoff and jitter. Pure logic, tested without any actor running.

use crate::config::SupervisionConfig;
use rand::Rng;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The restart rules of one supervisor.
#[derive(Clone, Debug)]
pub(crate) struct RestartPolicy {
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// More restarts than this within `window` escalates.
    pub max_restarts: u32,
    pub window: Duration,
}

impl From<&SupervisionConfig> for RestartPolicy {
    fn from(c: &SupervisionConfig) -> Self {
        Self {
            backoff_initial: Duration::from_millis(c.backoff_initial_ms),
            backoff_max: Duration::from_millis(c.backoff_max_ms.max(c.backoff_initial_ms)),
            max_restarts: c.max_restarts,
            window: Duration::from_secs(c.restart_window_secs),
        }
    }
}

/// What to do about a failure.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RestartDecision {
    /// Restart after this delay.
    Restart { after: Duration, attempt: u32 },
    /// Too many restarts within the window: escalate to the parent.
    GiveUp { restarts_in_window: u32 },
}

/// The recent restarts of one child.
#[derive(Debug, Default)]
pub(crate) struct RestartHistory {
    restarts: VecDeque<Instant>,
}

impl RestartHistory {
    /// Records a failure at `now` and decides what follows.
    pub(crate) fn on_failure(&mut self, policy: &RestartPolicy, now: Instant) -> RestartDecision {
        while let Some(&oldest) = self.restarts.front() {
            if now.duration_since(oldest) > policy.window {
                self.restarts.pop_front();
            } else {
                break;
            }
        }
        if self.restarts.len() as u32 >= policy.max_restarts {
            return RestartDecision::GiveUp {
                restarts_in_window: self.restarts.len() as u32,
            };
        }
        self.restarts.push_back(now);
        let attempt = self.restarts.len() as u32;
        RestartDecision::Restart {
            after: backoff_with_jitter(policy, attempt),
            attempt,
        }
    }
}

/// `initial * 2^(attempt-1)`, capped, then scaled by a random factor in [0.5, 1.0] so that
/// actors failing together do not restart in lockstep.
pub(super) fn backoff_with_jitter(policy: &RestartPolicy, attempt: u32) -> Duration {
    let exp = attempt.saturating_sub(1).min(20);
    let base = policy
        .backoff_initial
        .saturating_mul(1u32 << exp)
        .min(policy.backoff_max);
    base.mul_f64(rand::rng().random_range(0.5..=1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RestartPolicy {
        RestartPolicy {
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_millis(1000),
            max_restarts: 3,
            window: Duration::from_secs(10),
        }
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let p = policy();
        for attempt in 1..=8 {
            let d = backoff_with_jitter(&p, attempt);
            let nominal = (100u64 << (attempt - 1)).min(1000);
            assert!(d.as_millis() as u64 >= nominal / 2, "{attempt}: {d:?}");
            assert!(d.as_millis() as u64 <= nominal, "{attempt}: {d:?}");
        }
    }

    #[test]
    fn gives_up_past_the_intensity_and_forgets_old_restarts() {
        let p = policy();
        let mut h = RestartHistory::default();
        let t0 = Instant::now();
        for i in 1..=3 {
            assert!(matches!(
                h.on_failure(&p, t0),
                RestartDecision::Restart { attempt, .. } if attempt == i
            ));
        }
        assert_eq!(
            h.on_failure(&p, t0),
            RestartDecision::GiveUp {
                restarts_in_window: 3
            }
        );
        // After the window, the old restarts no longer count.
        let later = t0 + Duration::from_secs(11);
        assert!(matches!(
            h.on_failure(&p, later),
            RestartDecision::Restart { attempt: 1, .. }
        ));
    }
}
