//! The hooks runs in a workspace get, listed, and a workspace's own file trusted.

use super::{Engine, EngineError};
use crate::hooks::project::{self, Trust};
use ryvos_protocol::socket::{HooksListing, HooksTrusted};
use std::path::Path;

impl Engine {
    /// `config.toml`'s hooks, and `workspace`'s own with whether its file is trusted.
    pub async fn hooks(&self, workspace: Option<&Path>) -> Result<HooksListing, EngineError> {
        let mut hooks = project::listed(&self.hooks, true);
        let Some(workspace) = workspace else {
            return Ok(HooksListing {
                hooks,
                project: None,
            });
        };
        let file = project::read(workspace).map_err(EngineError::Hooks)?;
        let project = match file {
            None => None,
            Some(file) => {
                let trust = file.trust(&self.store).await?;
                if let Ok(theirs) = &file.hooks {
                    hooks.extend(project::listed(theirs, trust == Trust::Trusted));
                }
                Some(file.listed(trust))
            }
        };
        Ok(HooksListing { hooks, project })
    }

    /// Trusts `workspace`'s `.ryvos/hooks.toml` as it is now.
    pub async fn trust_hooks(&self, workspace: &Path) -> Result<HooksTrusted, EngineError> {
        let file = project::read(workspace)
            .map_err(EngineError::Hooks)?
            .ok_or_else(|| {
                EngineError::Hooks(format!(
                    "{} has no {}: there is nothing to trust",
                    workspace.display(),
                    crate::config::PROJECT_HOOKS_FILE
                ))
            })?;
        file.make_trusted(&self.store)
            .await
            .map_err(EngineError::Hooks)?;
        let hooks = file.hooks.as_deref().unwrap_or_default();
        Ok(HooksTrusted {
            file: file.path.display().to_string(),
            hash: file.hash.clone(),
            hooks: project::listed(hooks, true),
        })
    }
}
