//! The workspace a command names: `--workspace`, or the current directory, absolute.

use std::path::PathBuf;

/// The current directory, as a workspace (absolute, symlinks resolved).
pub fn here() -> Result<PathBuf, String> {
    workspace_of(None)
}

/// The workspace, absolute: `--workspace`, else the current directory.
pub fn workspace_of(asked: Option<PathBuf>) -> Result<PathBuf, String> {
    let dir = asked
        .map_or_else(std::env::current_dir, Ok)
        .map_err(|e| e.to_string())?;
    let root = ryvos::Workspace::new(&dir)
        .map(|w| w.root().to_path_buf())
        .map_err(|e| format!("{e}; give an existing directory with --workspace"))?;
    // A run is asked for in text (the socket's JSON, a queued run's record): a path that is
    // not UTF-8 would arrive as another path, so it is refused here.
    if root.to_str().is_none() {
        return Err(format!(
            "the workspace {} is not valid UTF-8, which runs cannot name: give a directory \
             whose path is",
            root.display()
        ));
    }
    Ok(root)
}
