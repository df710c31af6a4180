//! `[hooks]`: a person's programs run at each step of a run (docs/hooks.md), in `config.toml`
//! and, per project, in a workspace's `.ryvos/hooks.toml` (there once a person trusts it).

use ryvos_protocol::hook::HookEvent;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `[hooks]`: for each event, its hooks in the order they are written
/// (`[[hooks.PreToolUse]]`).
pub type HooksConfig = BTreeMap<HookEvent, Vec<HookSpec>>;

/// One hook: what it matches, and the command it runs or the address it posts to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HookSpec {
    /// Which tools (or, for `SessionStart`, `PreCompact`, `PostCompact` and `SessionEnd`,
    /// which source, trigger or reason) it runs for: a name, names joined by `|`, or a regular
    /// expression; empty or `*` for all.
    pub matcher: String,
    /// A shell command line, run by `sh -c` in the run's sandbox (as Claude Code runs its hooks).
    pub command: String,
    /// Instead of `command`: an `http://` or `https://` address the event is POSTed to (a
    /// loopback one, or one whose host `allowed_domains` names).
    pub url: String,
    /// Seconds before the hook is stopped (default 60); the step goes on without it.
    pub timeout_secs: Option<u64>,
    /// Names the hook may reach: its command through the sandbox's egress proxy, its address
    /// directly. Nothing else: a hook has no network of its own.
    pub allowed_domains: Vec<String>,
}

/// The file a workspace keeps its hooks in, relative to the workspace.
pub const PROJECT_HOOKS_FILE: &str = ".ryvos/hooks.toml";

/// What `.ryvos/hooks.toml` holds: `[[hooks.EVENT]]` tables, as `config.toml` writes them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProjectHooks {
    pub hooks: HooksConfig,
}

impl ProjectHooks {
    /// The hooks `text` configures, or what is wrong with it (with its line).
    pub fn parse(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|span| text[..span.start.min(text.len())].lines().count().max(1));
            match line {
                Some(line) => format!("line {line}: {}", e.message()),
                None => e.message().to_owned(),
            }
        })
    }
}
