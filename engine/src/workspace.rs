//! Confining file tools to the workspace.
//!
//! A path may be relative or absolute and may contain `..`, as long as where it leads stays
//! inside the workspace; symlinks are followed and must stay inside too. Anything else is
//! refused before any file is touched.

use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// The directory the file tools work in.
#[derive(Clone, Debug)]
pub struct Workspace {
    root: Arc<Path>,
}

/// A path the tools will not use.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WorkspaceError {
    #[error(
        "path '{path}' leads outside the workspace {root}; file tools only reach files inside it"
    )]
    Escape { path: String, root: String },
    #[error("the path is empty")]
    Empty,
    #[error("cannot use the workspace {root}: {cause}")]
    Root { root: String, cause: String },
    #[error("cannot resolve '{path}': {cause}")]
    Resolve { path: String, cause: String },
}

impl Workspace {
    /// The workspace at `root`, which must be an existing directory.
    pub fn new(root: &Path) -> Result<Self, WorkspaceError> {
        let refused = |cause: String| WorkspaceError::Root {
            root: root.display().to_string(),
            cause,
        };
        let canonical = root.canonicalize().map_err(|e| refused(e.to_string()))?;
        if !canonical.is_dir() {
            return Err(refused("it is not a directory".into()));
        }
        Ok(Self {
            root: canonical.into(),
        })
    }

    /// The workspace's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where `raw` leads, if that is inside the workspace. The file need not exist yet.
    pub fn resolve(&self, raw: &str) -> Result<PathBuf, WorkspaceError> {
        if raw.trim().is_empty() {
            return Err(WorkspaceError::Empty);
        }
        let escape = || WorkspaceError::Escape {
            path: raw.to_owned(),
            root: self.root.display().to_string(),
        };
        let joined = self.root.join(raw);
        let mut lexical = PathBuf::new();
        for component in joined.components() {
            match component {
                Component::ParentDir => {
                    if !lexical.pop() {
                        return Err(escape());
                    }
                }
                Component::CurDir => {}
                other => lexical.push(other),
            }
        }
        if !lexical.starts_with(&self.root) {
            return Err(escape());
        }
        // Follow symlinks in the part that exists; what does not exist yet cannot be one.
        let mut existing = lexical.as_path();
        let mut missing = Vec::new();
        loop {
            match existing.symlink_metadata() {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let (Some(name), Some(parent)) = (existing.file_name(), existing.parent())
                    else {
                        return Err(escape());
                    };
                    missing.push(name.to_owned());
                    existing = parent;
                }
                Err(e) => {
                    return Err(WorkspaceError::Resolve {
                        path: raw.to_owned(),
                        cause: e.to_string(),
                    })
                }
            }
        }
        let mut real = existing
            .canonicalize()
            .map_err(|e| WorkspaceError::Resolve {
                path: raw.to_owned(),
                cause: e.to_string(),
            })?;
        if !real.starts_with(&self.root) {
            return Err(escape());
        }
        real.extend(missing.iter().rev());
        Ok(real)
    }

    /// `path` relative to the workspace, for output.
    pub fn display<'p>(&self, path: &'p Path) -> std::path::Display<'p> {
        path.strip_prefix(&self.root).unwrap_or(path).display()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_paths_resolve_and_escapes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/a.txt"), "a").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let root = ws.root().to_path_buf();

        assert_eq!(ws.resolve("sub/a.txt").unwrap(), root.join("sub/a.txt"));
        assert_eq!(ws.resolve("sub/../new.txt").unwrap(), root.join("new.txt"));
        assert_eq!(
            ws.resolve(root.join("sub/x/y").to_str().unwrap()).unwrap(),
            root.join("sub/x/y")
        );
        for bad in [
            "../x",
            "/etc/passwd",
            "sub/../../x",
            "out/secret",
            "out/new/file",
        ] {
            assert!(
                matches!(ws.resolve(bad), Err(WorkspaceError::Escape { .. })),
                "{bad} should be refused"
            );
        }
        assert_eq!(ws.resolve(""), Err(WorkspaceError::Empty));
    }
}
