//! Confining file tools to the workspace.
//!
//! A path may be relative or absolute and may contain `..`, as long as where it leads stays
//! inside the workspace; symlinks are followed and must stay inside too. Anything else is
//! refused before any file is touched. The file is then opened beneath the workspace again, at
//! open time ([`Workspace::open`]): a symlink a concurrent command swaps in between the check
//! and the open cannot lead out either.

use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// The directory the file tools work in.
#[derive(Clone, Debug)]
pub struct Workspace {
    root: Arc<Path>,
}

/// A file opened beneath the workspace.
#[derive(Debug)]
pub struct Opened {
    pub file: std::fs::File,
    /// Where it really is.
    pub real: PathBuf,
    /// This open made it.
    pub created: bool,
}

/// Where an open file really is, as the kernel says.
fn opened_path(file: &std::fs::File) -> io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

/// What a file is opened for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    /// Created if missing; read and written.
    Write,
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

    /// Opens `path` (as [`Workspace::resolve`] gave it) for `access`, resolving it beneath the
    /// workspace as it is opened (cap-std: `openat2` with `RESOLVE_BENEATH` where the kernel
    /// has it): a path that leads out by then, through a symlink or `..`, is refused. Says
    /// where the file really is (a symlink swapped in inside the workspace may lead elsewhere
    /// in it: the caller checks that place) and whether this open made it. `Access::Write`
    /// creates the file (and its missing directories) without truncating it: the caller
    /// truncates once it has checked.
    pub fn open(&self, path: &Path, access: Access) -> io::Result<Opened> {
        let inside = path.strip_prefix(&self.root).map_err(|_| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{} is outside the workspace", path.display()),
            )
        })?;
        let root = cap_std::fs::Dir::open_ambient_dir(&self.root, cap_std::ambient_authority())?;
        let mut options = cap_std::fs::OpenOptions::new();
        match access {
            Access::Read => {
                options.read(true);
            }
            Access::Write => {
                if let Some(parent) = inside.parent().filter(|p| !p.as_os_str().is_empty()) {
                    root.create_dir_all(parent)?;
                }
                options.read(true).write(true).create_new(true);
            }
        }
        let (file, created) = match root.open_with(inside, &options) {
            Ok(file) => (file, access == Access::Write),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let mut existing = cap_std::fs::OpenOptions::new();
                existing.read(true).write(true);
                (root.open_with(inside, &existing)?, false)
            }
            Err(e) => return Err(e),
        };
        let file = file.into_std();
        let real = opened_path(&file)?;
        Ok(Opened {
            file,
            real,
            created,
        })
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

    #[test]
    fn a_symlink_swapped_in_after_resolving_does_not_lead_out() {
        use std::io::{Read, Write};
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "outside").unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let resolved = ws.resolve("sub/secret").unwrap();
        // A command replaces the directory with a link out between the check and the open.
        std::fs::remove_dir(dir.path().join("sub")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("sub")).unwrap();
        assert!(ws.open(&resolved, Access::Read).is_err());
        assert!(ws.open(&resolved, Access::Write).is_err());
        // A relative link that stays inside is followed, and the real place is told.
        std::fs::create_dir(dir.path().join("real")).unwrap();
        std::os::unix::fs::symlink("real", dir.path().join("alias")).unwrap();
        let opened = ws
            .open(&ws.resolve("alias/x").unwrap(), Access::Write)
            .unwrap();
        assert_eq!(opened.real, ws.root().join("real/x"));
        assert!(opened.created);
        assert_eq!(
            std::fs::read_to_string(outside.path().join("secret")).unwrap(),
            "outside"
        );
        // Inside, both work, missing directories made.
        let mut file = ws
            .open(&ws.resolve("a/b/c.txt").unwrap(), Access::Write)
            .unwrap()
            .file;
        file.write_all(b"inside").unwrap();
        let mut text = String::new();
        ws.open(&ws.resolve("a/b/c.txt").unwrap(), Access::Read)
            .unwrap()
            .file
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "inside");
    }
}
