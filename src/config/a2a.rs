//! `[a2a]`: the A2A door on `ryvosd`'s HTTP listener, off unless `workspace` names where the
//! tasks other agents hand over are worked on.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[a2a]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct A2aConfig {
    /// The directory (absolute) the tasks work in; empty: no A2A door.
    pub workspace: String,
    /// The agent's name, as its card gives it.
    pub name: String,
    /// What the agent does, as its card tells other agents.
    pub description: String,
    /// What the agent is good at, as its card lists it.
    pub skills: Vec<A2aSkill>,
    /// Whether a caller's push notification URL may be at a loopback, private or link-local
    /// address (inside the daemon's network); off, only public addresses are POSTed to.
    pub allow_private_push_urls: bool,
}

/// One skill of `[a2a] skills`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct A2aSkill {
    pub id: String,
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub tags: Vec<String>,
}

impl Default for A2aConfig {
    fn default() -> Self {
        Self {
            workspace: String::new(),
            name: "Ryvos".into(),
            description: "A Ryvos agent: it works on a task with its tools in its workspace, \
                          durably, within its budgets and its security policy"
                .into(),
            skills: Vec::new(),
            allow_private_push_urls: false,
        }
    }
}

impl A2aConfig {
    /// Where tasks work, `None` when the door is off; why it cannot be served as configured.
    pub fn workspace(&self) -> Result<Option<PathBuf>, String> {
        if self.workspace.is_empty() {
            return Ok(None);
        }
        let workspace = PathBuf::from(&self.workspace);
        if !workspace.is_absolute() || !workspace.is_dir() {
            return Err(format!(
                "[a2a] workspace = \"{}\" is not an absolute directory that exists: give one, or \
                 leave it empty to serve no A2A door",
                self.workspace
            ));
        }
        Ok(Some(workspace))
    }
}
