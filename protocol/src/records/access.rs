//! Who may use the daemon's HTTP door: bearer tokens for programs, console sessions for
//! people, and the key approval links are signed with. Only hashes of tokens and cookies are
//! kept, so no credential can be read back out of the store. The store also keeps where A2A
//! callers asked to be told of their tasks ([`PushTarget`]), with the secrets they gave to be
//! told with: those must be sent, so they are kept as given.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a token may do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// See sessions, runs, events, approvals and costs; change nothing.
    Read,
    /// Also answer approvals, continue and stop runs.
    #[default]
    Operate,
}

impl Scope {
    /// The scope as the command line writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Operate => "operate",
        }
    }

    /// Whether it allows changing anything.
    pub fn operates(self) -> bool {
        self == Scope::Operate
    }
}

/// One credential as the store keeps it, under its `id` (`token:NAME`, `console:HASH`,
/// `link-key`, `spent:LINK`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Credential {
    pub id: String,
    pub kind: CredentialKind,
    pub created_ms: u64,
    /// After this it counts for nothing (and may be swept away); `None`: until revoked.
    #[serde(default)]
    pub expires_ms: Option<u64>,
}

impl Credential {
    /// Whether it has expired at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expires_ms.is_some_and(|at| at <= now_ms)
    }
}

/// What a credential is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CredentialKind {
    /// A bearer token, named by whoever made it; `hash` is the SHA-256 of its secret, in hex.
    Token {
        name: String,
        scope: Scope,
        hash: String,
    },
    /// A person logged in to the console (the id holds the cookie's hash).
    ConsoleSession,
    /// The key approval links are signed with, in hex: one for every daemon sharing the store.
    LinkKey { key: String },
    /// An approval link that was used: it works once.
    SpentLink,
    /// Where an A2A task's updates are POSTed (`push:TASK/ID`).
    PushTarget(PushTarget),
    /// A workspace's hooks file a person trusted (`hooks:FILE#HASH`): its hooks run while the
    /// file's BLAKE3 hash is `hash`.
    TrustedHooks { file: String, hash: String },
}

/// Where an A2A caller asked a task's updates to be POSTed, and what to send with them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PushTarget {
    /// The task (`r_…@s_…`).
    pub task: String,
    /// Its id among the task's targets.
    pub id: String,
    pub url: String,
    /// Sent back as `X-A2A-Notification-Token`, for the receiver to know the sender.
    #[serde(default)]
    pub token: Option<String>,
    /// `Authorization: SCHEME CREDENTIALS`, when both are given.
    #[serde(default)]
    pub auth_scheme: Option<String>,
    #[serde(default)]
    pub auth_credentials: Option<String>,
}

/// A token as `ryvos token list` shows it: never its secret.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TokenInfo {
    pub name: String,
    pub scope: Scope,
    /// When it was made, in milliseconds since the epoch.
    pub created_ms: u64,
}
