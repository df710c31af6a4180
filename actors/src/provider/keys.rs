//! API keys and their rotation: with several keys configured, a 429 moves every later request
//! to the next key. Keys stay `${VAR}` until a request needs them, and never appear in an
//! error, a log or an event: a key is named by its position ("key 2 of 3").

use super::ProviderError;
use crate::config::expand_env;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The keys of one endpoint, in the order they are tried.
#[derive(Debug)]
pub(crate) struct ApiKeys {
    /// As configured: `${VAR}` unexpanded.
    keys: Vec<String>,
    /// The key in use, as an index into `keys`.
    current: AtomicUsize,
    /// The config key they came from, for error messages.
    field: &'static str,
}

/// The key one request carries.
pub(crate) struct KeyInUse {
    /// Its position, to rotate away from it after a 429.
    pub index: usize,
    /// The expanded key; empty means no authentication.
    pub secret: String,
}

impl ApiKeys {
    /// `api_keys` when given, else the single `api_key`.
    pub(crate) fn new(api_key: &str, api_keys: &[String], field: &'static str) -> Self {
        let keys = if api_keys.is_empty() {
            vec![api_key.to_owned()]
        } else {
            api_keys.to_vec()
        };
        Self {
            keys,
            current: AtomicUsize::new(0),
            field,
        }
    }

    /// The key the next request carries, expanded.
    pub(crate) fn current(&self) -> Result<KeyInUse, ProviderError> {
        self.expanded(self.current.load(Ordering::Relaxed) % self.keys.len().max(1))
    }

    /// Whether every key expands (its `${VAR}`s are set).
    pub(crate) fn check_all(&self) -> Result<(), ProviderError> {
        (0..self.keys.len()).try_for_each(|index| self.expanded(index).map(drop))
    }

    /// The key at `index`, expanded.
    fn expanded(&self, index: usize) -> Result<KeyInUse, ProviderError> {
        let raw = self.keys.get(index).map_or("", String::as_str);
        let field = if self.keys.len() > 1 {
            format!("{}s[{index}]", self.field)
        } else {
            self.field.to_owned()
        };
        let secret = expand_env(raw, &field).map_err(|e| ProviderError::Config(e.to_string()))?;
        Ok(KeyInUse { index, secret })
    }

    /// After a 429 on the key at `used`: later requests carry the next key. Concurrent
    /// requests that failed on the same key move it on once, not once each.
    pub(crate) fn rotate_after(&self, used: usize) {
        let count = self.keys.len();
        if count > 1 {
            let next = (used + 1) % count;
            // Only the first of several requests rejected on `used` rotates.
            let _ = self
                .current
                .compare_exchange(used, next, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// Which key the next request carries, as "key 2 of 3" (never the key itself); empty
    /// with a single key.
    pub(crate) fn label(&self) -> String {
        let count = self.keys.len();
        if count > 1 {
            let index = self.current.load(Ordering::Relaxed) % count;
            format!("key {} of {count}", index + 1)
        } else {
            String::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_429_moves_to_the_next_key_once_and_wraps() {
        let keys = ApiKeys::new("", &["a".into(), "b".into(), "c".into()], "model.api_key");
        assert_eq!(keys.current().unwrap().secret, "a");
        keys.rotate_after(0);
        keys.rotate_after(0);
        assert_eq!(keys.current().unwrap().secret, "b");
        keys.rotate_after(1);
        keys.rotate_after(2);
        assert_eq!(keys.current().unwrap().index, 0);
        assert_eq!(keys.label(), "key 1 of 3");
    }

    #[test]
    fn an_unset_variable_is_named_without_the_key() {
        let keys = ApiKeys::new(
            "",
            &["${RYVOS_TEST_UNSET_KEY_VAR}".into(), "x".into()],
            "model.api_key",
        );
        let e = keys.current().err().unwrap().to_string();
        assert!(e.contains("RYVOS_TEST_UNSET_KEY_VAR"), "{e}");
        assert!(e.contains("model.api_keys[0]"), "{e}");
    }
}
