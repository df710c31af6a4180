//! The socket calls that list the hooks a workspace's runs get, and trust a workspace's own.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `hooks` and `hooks_trust`'s parameters: the workspace (absolute), whose `.ryvos/hooks.toml`
/// is looked at; without it, only `config.toml`'s hooks are listed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HooksParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
}

/// The hooks a run in the workspace gets, and those it does not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct HooksListing {
    /// Every hook configured, `config.toml`'s first.
    pub hooks: Vec<ListedHook>,
    /// The workspace's hooks file, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<ProjectHooksFile>,
}

/// One configured hook.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ListedHook {
    pub event: crate::hook::HookEvent,
    /// As written; empty matches everything.
    pub matcher: String,
    /// Where it is configured, and the command it runs or the address it posts to.
    pub hook: String,
    pub timeout_secs: u64,
    /// Whether runs get it: `config.toml`'s always, a workspace's while its file is trusted.
    pub runs: bool,
}

/// A workspace's `.ryvos/hooks.toml`, and whether a person trusted it as it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ProjectHooksFile {
    pub file: String,
    /// BLAKE3 of its content, in hex.
    pub hash: String,
    /// `trusted`, `untrusted` (never trusted), `changed` (trusted before, as other content),
    /// or `invalid` (it cannot be read as hooks: `error` says why).
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `hooks_trust`'s result: the file trusted as it is now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct HooksTrusted {
    pub file: String,
    pub hash: String,
    /// The hooks it configures, which runs in the workspace now get.
    pub hooks: Vec<ListedHook>,
}
