//! Who may use the console: one-time login codes (`ryvos console` asks the socket for one)
//! traded for a session cookie. Only hashes of codes and cookies are kept, so neither can be
//! read back out of the daemon; failed logins are rate-limited.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a login code works, if it is not used first.
pub(super) const CODE_LIFETIME: Duration = Duration::from_secs(5 * 60);
/// How long a console session lasts without being used.
pub(super) const SESSION_IDLE: Duration = Duration::from_secs(12 * 60 * 60);
/// Failed logins allowed within [`FAILURE_WINDOW`] before logins are refused until it passes.
const MAX_FAILURES: usize = 10;
const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// A secret's SHA-256: what is kept of it.
type Hashed = [u8; 32];

/// The console's codes and sessions.
#[derive(Default)]
pub(crate) struct Access {
    /// Unused codes, until they expire.
    codes: Mutex<HashMap<Hashed, Instant>>,
    /// Console sessions, with when they were last used.
    sessions: Mutex<HashMap<Hashed, Instant>>,
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

impl Access {
    /// A new one-time login code.
    pub(crate) fn new_code(&self) -> String {
        let code = secret();
        let now = Instant::now();
        let mut codes = lock(&self.codes);
        codes.retain(|_, expires| *expires > now);
        codes.insert(hash(&code), now + CODE_LIFETIME);
        code
    }

    /// Trades `code` for a new session's cookie value; the code works once.
    pub(super) fn log_in(&self, code: &str) -> Result<String, Refused> {
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
        let cookie = secret();
        let mut sessions = lock(&self.sessions);
        sessions.retain(|_, used| now.duration_since(*used) < SESSION_IDLE);
        sessions.insert(hash(&cookie), now);
        Ok(cookie)
    }

    /// Whether `cookie` is a live session's; using it keeps it alive.
    pub(super) fn admits(&self, cookie: &str) -> bool {
        let now = Instant::now();
        let mut sessions = lock(&self.sessions);
        match sessions.get_mut(&hash(cookie)) {
            Some(used) if now.duration_since(*used) < SESSION_IDLE => {
                *used = now;
                true
            }
            _ => false,
        }
    }

    /// Ends the session of `cookie`.
    pub(super) fn log_out(&self, cookie: &str) {
        lock(&self.sessions).remove(&hash(cookie));
    }
}

/// 256 random bits, as hex.
fn secret() -> String {
    let mut bytes = [0u8; 32];
    // The OS's generator failing leaves nothing to log in with: nothing safe to fall back on.
    getrandom::fill(&mut bytes).expect("the operating system's random number generator");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hash(secret: &str) -> Hashed {
    Sha256::digest(secret.as_bytes()).into()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_works_once_and_its_session_is_admitted() {
        let access = Access::default();
        let code = access.new_code();
        let cookie = access.log_in(&code).unwrap();
        assert!(access.admits(&cookie));
        assert_eq!(access.log_in(&code), Err(Refused::Code));
        assert!(!access.admits(&code), "a code is not a session");
        access.log_out(&cookie);
        assert!(!access.admits(&cookie));
    }

    #[test]
    fn failed_logins_are_rate_limited() {
        let access = Access::default();
        for _ in 0..MAX_FAILURES {
            assert_eq!(access.log_in("guess"), Err(Refused::Code));
        }
        let code = access.new_code();
        assert!(matches!(access.log_in(&code), Err(Refused::TooMany(_))));
    }
}
