//! When to try a failed call again: exponential backoff with jitter (500 ms doubling, capped),
//! a bounded number of retries, a wait the server asked for honoured up to a cap, and one
//! deadline over all attempts. Shared by the model and embeddings clients.

use super::{ProviderError, Recovery};
use crate::config::ModelConfig;
use backon::{BackoffBuilder, ExponentialBuilder};
use std::time::Duration;

/// How failed calls are tried again.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RetryPolicy {
    /// Attempts after the first, per model.
    pub max_retries: u32,
    /// The first backoff; it doubles with each retry.
    pub base_delay: Duration,
    /// No backoff is longer than this.
    pub max_backoff: Duration,
    /// A server asking for a longer wait than this is not waited for.
    pub max_retry_after: Duration,
    /// All attempts of one call, waits included, end by then.
    pub deadline: Duration,
}

impl RetryPolicy {
    /// The policy of `[model]`.
    pub(crate) fn from_config(config: &ModelConfig) -> Self {
        Self {
            max_retries: config.max_retries,
            base_delay: Duration::from_millis(config.retry_base_ms.max(1)),
            max_backoff: Duration::from_secs(config.retry_max_backoff_secs.max(1)),
            max_retry_after: Duration::from_secs(config.max_retry_after_secs),
            deadline: Duration::from_secs(config.call_deadline_secs.max(1)),
        }
    }

    /// The backoffs between one model's attempts, in order: `max_retries` of them.
    pub(crate) fn backoffs(&self) -> Backoffs {
        let schedule = ExponentialBuilder::default()
            .with_min_delay(self.base_delay)
            .with_max_delay(self.max_backoff)
            .with_factor(2.0)
            .with_max_times(self.max_retries as usize)
            .with_jitter()
            .build();
        Backoffs {
            schedule,
            cap: self.max_backoff,
        }
    }

    /// How long to wait before the next attempt: the server's wait when it gave one (`Err`
    /// with it when it is longer than `max_retry_after`), else the next backoff. `None` when
    /// the retries are used up.
    pub(crate) fn next_wait(
        &self,
        backoffs: &mut Backoffs,
        asked: Option<Duration>,
    ) -> Option<Result<Duration, Duration>> {
        let backoff = backoffs.next()?;
        Some(match asked {
            Some(asked) if asked > self.max_retry_after => Err(asked),
            Some(asked) => Ok(asked),
            None => Ok(backoff),
        })
    }
}

/// Makes `call` until it succeeds, retrying what [`ProviderError::recovery`] says is transient
/// as this policy says. When every attempt fails, the error lists them (a single attempt's
/// error is returned as it is). `what` names the call in logs.
pub(crate) async fn with_retries<T, F, Fut>(
    policy: &RetryPolicy,
    what: &str,
    mut call: F,
) -> Result<T, ProviderError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ProviderError>>,
{
    let deadline = tokio::time::Instant::now() + policy.deadline;
    let mut backoffs = policy.backoffs();
    let mut failures = Vec::new();
    loop {
        let error = match tokio::time::timeout_at(deadline, call()).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(error)) => error,
            Err(_) => {
                failures.push(format!(
                    "the deadline ({}s) passed",
                    policy.deadline.as_secs()
                ));
                return Err(ProviderError::Exhausted(failures));
            }
        };
        tracing::warn!(attempt = failures.len() + 1, "{what} failed: {error}");
        failures.push(error.to_string());
        let wait = match error.recovery() {
            Recovery::Retry => policy.next_wait(&mut backoffs, error.retry_after()),
            Recovery::FailFast | Recovery::Prune => None,
        };
        let wait = match wait {
            Some(Ok(wait)) if tokio::time::Instant::now() + wait <= deadline => wait,
            Some(Err(asked)) => {
                failures.push(format!(
                    "not retried: the server asked to wait {}s, more than {}s",
                    asked.as_secs(),
                    policy.max_retry_after.as_secs()
                ));
                return Err(ProviderError::Exhausted(failures));
            }
            _ if failures.len() == 1 => return Err(error),
            _ => return Err(ProviderError::Exhausted(failures)),
        };
        tokio::time::sleep(wait).await;
    }
}

/// The backoff schedule of one model's retries.
pub(crate) struct Backoffs {
    schedule: backon::ExponentialBackoff,
    cap: Duration,
}

impl Iterator for Backoffs {
    type Item = Duration;

    /// The schedule's jitter adds up to the delay again; past the cap, a wait is spread over
    /// its upper half instead, so clients that reached it do not retry in lockstep.
    fn next(&mut self) -> Option<Duration> {
        let wait = self.schedule.next()?;
        if wait <= self.cap {
            return Some(wait);
        }
        let half = self.cap / 2;
        Some(half + half.mul_f64(rand::random::<f64>()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy::from_config(&ModelConfig::default())
    }

    #[test]
    fn backoffs_double_from_500_ms_with_jitter_and_stay_under_the_cap() {
        let p = RetryPolicy {
            max_retries: 8,
            ..policy()
        };
        let waits: Vec<Duration> = p.backoffs().collect();
        assert_eq!(waits.len(), 8);
        for (i, wait) in waits.iter().enumerate() {
            let base = Duration::from_millis(500 * (1 << i));
            if base * 2 <= p.max_backoff {
                // Below the cap: the base delay plus up to as much again.
                assert!(*wait >= base && *wait <= base * 2, "{i}: {wait:?}");
            } else {
                assert!(
                    *wait >= p.max_backoff / 2 && *wait <= p.max_backoff,
                    "{i}: {wait:?}"
                );
            }
        }
        let capped: std::collections::HashSet<Duration> = waits[5..].iter().copied().collect();
        assert!(capped.len() > 1, "waits at the cap are spread: {capped:?}");
    }

    #[test]
    fn a_servers_wait_is_honoured_up_to_the_cap() {
        let p = policy();
        let mut b = p.backoffs();
        assert_eq!(
            p.next_wait(&mut b, Some(Duration::from_secs(2))),
            Some(Ok(Duration::from_secs(2)))
        );
        assert_eq!(
            p.next_wait(&mut b, Some(Duration::from_secs(3600))),
            Some(Err(Duration::from_secs(3600)))
        );
        let mut none = RetryPolicy {
            max_retries: 0,
            ..p.clone()
        }
        .backoffs();
        assert_eq!(p.next_wait(&mut none, None), None);
    }
}
