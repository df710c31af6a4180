//! `$RYVOS_HOME` is private to its owner, whoever makes it: the directory 0700, what is in it
//! 0600. It holds the store (every transcript and tool output), the run logs, the config and
//! the socket. A home found open to others (made by an older Ryvos, or by hand) is tightened,
//! and said so; a home owned by another user is refused.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why the home cannot be made private.
#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    #[error("RYVOS_HOME {home} cannot be made: {cause}")]
    Create { home: String, cause: std::io::Error },
    #[error(
        "RYVOS_HOME {home} belongs to uid {owner}, not to this user (uid {me}): its store and \
         logs would be another user's. Set RYVOS_HOME to a directory of your own"
    )]
    NotOwned { home: String, owner: u32, me: u32 },
    #[error("RYVOS_HOME {home} cannot be made private: {path}: {cause}")]
    Tighten {
        home: String,
        path: String,
        cause: std::io::Error,
    },
}

/// Makes `home` (0700) if it does not exist, or makes it private if it does: the directory
/// 0700 and everything in it closed to group and others. Returns the paths that were open to
/// others and are not any more (empty for a home that was private already).
pub fn make_private(home: &Path) -> Result<Vec<PathBuf>, HomeError> {
    let shown = || home.display().to_string();
    if !home.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(home)
            .map_err(|cause| HomeError::Create {
                home: shown(),
                cause,
            })?;
    }
    // A home that is a link is its target: that is what must be private.
    let home = &home.canonicalize().map_err(|cause| HomeError::Create {
        home: shown(),
        cause,
    })?;
    let meta = std::fs::metadata(home).map_err(|cause| HomeError::Create {
        home: shown(),
        cause,
    })?;
    // SAFETY: geteuid only reads the caller's id.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(HomeError::NotOwned {
            home: shown(),
            owner: meta.uid(),
            me,
        });
    }
    if meta.mode() & 0o077 == 0 {
        return Ok(Vec::new());
    }
    // A home that was open: everything made in it meanwhile may be open too.
    let mut tightened = Vec::new();
    tighten(home, &mut tightened).map_err(|(path, cause)| HomeError::Tighten {
        home: shown(),
        path: path.display().to_string(),
        cause,
    })?;
    Ok(tightened)
}

/// Takes group's and others' rights from `path` and, for a directory, from everything in it
/// (symbolic links are not followed).
fn tighten(path: &Path, tightened: &mut Vec<PathBuf>) -> Result<(), (PathBuf, std::io::Error)> {
    let fail = |e| (path.to_path_buf(), e);
    let meta = std::fs::symlink_metadata(path).map_err(fail)?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & !0o077))
            .map_err(fail)?;
        tightened.push(path.to_path_buf());
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).map_err(fail)? {
            tighten(&entry.map_err(fail)?.path(), tightened)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().mode() & 0o777
    }

    #[test]
    fn a_new_home_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("a/b/home");
        assert!(make_private(&home).unwrap().is_empty());
        assert_eq!(mode(&home), 0o700);
    }

    #[test]
    fn an_open_home_and_what_it_holds_are_tightened() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join("logs/s_1")).unwrap();
        std::fs::write(home.join("ryvos.redb"), "").unwrap();
        std::fs::write(home.join("logs/s_1/run.jsonl"), "").unwrap();
        for (path, mode) in [
            (home.clone(), 0o755),
            (home.join("logs"), 0o755),
            (home.join("ryvos.redb"), 0o644),
            (home.join("logs/s_1/run.jsonl"), 0o640),
        ] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let tightened = make_private(&home).unwrap();
        assert!(
            tightened.contains(&home.join("ryvos.redb")),
            "{tightened:?}"
        );
        assert_eq!(mode(&home), 0o700);
        assert_eq!(mode(&home.join("logs")), 0o700);
        assert_eq!(mode(&home.join("ryvos.redb")), 0o600);
        assert_eq!(mode(&home.join("logs/s_1/run.jsonl")), 0o600);
        // Private already: nothing is walked again.
        assert!(make_private(&home).unwrap().is_empty());
    }
}
