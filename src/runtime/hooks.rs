//! The hooks runs in a workspace get, for every door: listed, and a workspace's own trusted.

use super::{Runtime, RuntimeError};
use ryvos_protocol::socket::{HooksListing, HooksParams, HooksTrusted};
use std::path::PathBuf;

impl Runtime {
    /// `config.toml`'s hooks, and the workspace's own (`.ryvos/hooks.toml`) with whether a
    /// person trusted its file as it is.
    pub async fn hooks(&self, params: HooksParams) -> Result<HooksListing, RuntimeError> {
        let workspace = absolute(params.workspace)?;
        Ok(self.engine.hooks(workspace.as_deref()).await?)
    }

    /// Trusts the workspace's `.ryvos/hooks.toml` as it is now: its hooks run until it changes.
    pub async fn trust_hooks(&self, params: HooksParams) -> Result<HooksTrusted, RuntimeError> {
        let workspace = absolute(params.workspace)?.ok_or_else(|| {
            RuntimeError::BadRequest("name the workspace whose hooks to trust".into())
        })?;
        Ok(self.engine.trust_hooks(&workspace).await?)
    }
}

fn absolute(workspace: Option<String>) -> Result<Option<PathBuf>, RuntimeError> {
    let workspace = workspace.map(PathBuf::from);
    if workspace.as_ref().is_some_and(|dir| dir.is_relative()) {
        return Err(RuntimeError::BadRequest(
            "a workspace must be an absolute path".into(),
        ));
    }
    Ok(workspace)
}
