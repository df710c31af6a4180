//! Who may use the daemon's HTTP door, kept in the store so that every daemon sharing it
//! agrees: bearer tokens for programs ([`Access::create_token`]), console sessions for people
//! ([`Access::open_session`]), and the key approval links are signed with. Only SHA-256
//! hashes of tokens and cookies are stored; a secret is shown once, to whoever made it. A2A
//! tasks' push targets live here too ([`Access::set_push_target`]).

pub mod links;
mod push;
mod tokens;

pub use push::{check_push_target_id, MAX_PUSH_TARGETS};
use ryvos_actors::{now_ms, Store, StoreError};
use ryvos_protocol::records::{Credential, CredentialKind};
pub use ryvos_protocol::records::{PushTarget, Scope, TokenInfo};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// How long a console session lasts from its login.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);

/// The store's credentials, from [`crate::Runtime::access`]. Cheap to clone.
#[derive(Clone)]
pub struct Access {
    store: Store,
    /// The approval links' key, once read (or made).
    link_key: std::sync::Arc<tokio::sync::OnceCell<String>>,
}

/// Why a credential could not be made or changed.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// What was asked for is not allowed; the message says what to do instead.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Access {
    pub(crate) fn new(store: Store) -> Self {
        Self {
            store,
            link_key: Default::default(),
        }
    }

    /// Opens a console session for someone who just logged in; its cookie's value.
    pub async fn open_session(&self) -> Result<String, AccessError> {
        let now = now_ms();
        // Logins are rare: the moment to sweep what expired.
        self.store.remove_expired_credentials(now).await?;
        let cookie = secret();
        let session = Credential {
            id: session_id(&cookie),
            kind: CredentialKind::ConsoleSession,
            created_ms: now,
            expires_ms: Some(now + SESSION_LIFETIME.as_millis() as u64),
        };
        self.store.add_credential(&session).await?;
        Ok(cookie)
    }

    /// Whether `cookie` is a live console session's (on any daemon sharing the store).
    pub async fn session_is_open(&self, cookie: &str) -> Result<bool, AccessError> {
        let held = self.store.credential(&session_id(cookie)).await?;
        Ok(held.is_some_and(|s| {
            matches!(s.kind, CredentialKind::ConsoleSession) && !s.expired(now_ms())
        }))
    }

    /// Ends the console session of `cookie`, everywhere.
    pub async fn close_session(&self, cookie: &str) -> Result<(), AccessError> {
        self.store.remove_credential(&session_id(cookie)).await?;
        Ok(())
    }
}

fn session_id(cookie: &str) -> String {
    format!("console:{}", hash(cookie))
}

/// 256 random bits, as hex: a token's, a cookie's or a code's secret.
pub fn secret() -> String {
    let mut bytes = [0u8; 32];
    // The OS's generator failing leaves nothing to make a secret with: nothing safe to fall
    // back on.
    getrandom::fill(&mut bytes).expect("the operating system's random number generator");
    hex(&bytes)
}

/// A secret's SHA-256, in hex: what is kept of it. Comparing hashes, not secrets, leaks
/// nothing through timing that helps guess a secret.
pub fn hash(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
