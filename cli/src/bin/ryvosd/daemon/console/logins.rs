//! One-time login codes (`ryvos console` asks the socket for one), traded for a console
//! session kept in the store (see `ryvos::access`). Codes live in memory: they last minutes,
//! and a daemon that restarts asks for a new one. Only hashes of codes are kept; failed
//! logins are rate-limited.

use ryvos::access::hash;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a login code works, if it is not used first.
pub(super) const CODE_LIFETIME: Duration = Duration::from_secs(5 * 60);
/// Failed logins allowed within [`FAILURE_WINDOW`] before logins are refused until it passes.
const MAX_FAILURES: usize = 10;
const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// The console's unused login codes, and its recent failed logins.
#[derive(Default)]
pub(crate) struct Logins {
    /// Unused codes' hashes, until they expire.
    codes: Mutex<HashMap<String, Instant>>,
    /// When the recent failed logins were.
    failures: Mutex<Vec<Instant>>,
}

/// Why a login was refused.
#[derive(Debug, PartialEq)]
pub(super) enum Refused {
    /// The code is not one (wrong, used, or expired).
    Code,
    /// Too many failed logins lately; try again in this long.
    TooMany(Duration),
}

impl Logins {
    /// A new one-time login code.
    pub(crate) fn new_code(&self) -> String {
        let code = ryvos::access::secret();
        let now = Instant::now();
        let mut codes = lock(&self.codes);
        codes.retain(|_, expires| *expires > now);
        codes.insert(hash(&code), now + CODE_LIFETIME);
        code
    }

    /// Uses `code` up; refused unless it is a live code.
    pub(super) fn redeem(&self, code: &str) -> Result<(), Refused> {
        let now = Instant::now();
        {
            let mut failures = lock(&self.failures);
            failures.retain(|at| now.duration_since(*at) < FAILURE_WINDOW);
            if failures.len() >= MAX_FAILURES {
                let wait = FAILURE_WINDOW.saturating_sub(now.duration_since(failures[0]));
                return Err(Refused::TooMany(wait));
            }
        }
        let valid = lock(&self.codes)
            .remove(&hash(code))
            .is_some_and(|expires| expires > now);
        if !valid {
            lock(&self.failures).push(now);
            return Err(Refused::Code);
        }
        Ok(())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_works_once() {
        let logins = Logins::default();
        let code = logins.new_code();
        assert_eq!(logins.redeem(&code), Ok(()));
        assert_eq!(logins.redeem(&code), Err(Refused::Code));
    }

    #[test]
    fn failed_logins_are_rate_limited() {
        let logins = Logins::default();
        for _ in 0..MAX_FAILURES {
            assert_eq!(logins.redeem("guess"), Err(Refused::Code));
        }
        let code = logins.new_code();
        assert!(matches!(logins.redeem(&code), Err(Refused::TooMany(_))));
    }
}
