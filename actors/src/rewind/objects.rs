//! The snapshot objects: file contents, manifests and summaries, each kept once under the
//! hash of its bytes in `$RYVOS_HOME/snapshots/objects`. An unchanged file costs nothing.
//!
//! Objects are written to a temporary file and renamed into place, so one is whole or absent;
//! they are not synced to disk one by one (a turn would wait on the disk for every file), so
//! after a power loss one may be missing or torn: every read checks the hash, and a rewind
//! that needs a bad one is refused before it changes anything.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A content-addressed object directory.
#[derive(Clone, Debug)]
pub(super) struct Objects {
    dir: PathBuf,
}

impl Objects {
    /// The objects under `dir`, made when first written to.
    pub(super) fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// The id `bytes` are kept under.
    pub(super) fn id_of(bytes: &[u8]) -> String {
        blake3::hash(bytes).to_hex().to_string()
    }

    fn path(&self, id: &str) -> PathBuf {
        let (fan, rest) = id.split_at(2.min(id.len()));
        self.dir.join(fan).join(rest)
    }

    /// Keeps `bytes`; their id.
    pub(super) fn put(&self, bytes: &[u8]) -> io::Result<String> {
        let id = Self::id_of(bytes);
        let path = self.path(&id);
        // Kept already: unless torn (a power loss after its rename), whose size gives it away.
        if fs::metadata(&path).is_ok_and(|m| m.len() == bytes.len() as u64) {
            return Ok(id);
        }
        let dir = path.parent().unwrap_or(&self.dir);
        private_dir(dir)?;
        let mut file = tempfile::Builder::new().prefix(".new-").tempfile_in(dir)?;
        file.write_all(bytes)?;
        file.persist(&path).map_err(|e| e.error)?;
        Ok(id)
    }

    /// Object `id`'s bytes, checked against its id.
    pub(super) fn read(&self, id: &str) -> io::Result<Vec<u8>> {
        let bytes = fs::read(self.path(id)).map_err(|e| {
            io::Error::new(e.kind(), format!("snapshot object {id} is missing: {e}"))
        })?;
        if Self::id_of(&bytes) != id {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("snapshot object {id} is damaged (its bytes no longer match it)"),
            ));
        }
        Ok(bytes)
    }
}

/// Makes `dir` (and its parents) private to this user: snapshots hold copies of the
/// workspace's files. Objects are made 0600 by their temporary files.
pub(super) fn private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_kept_once_and_checked_when_read() {
        let dir = tempfile::tempdir().unwrap();
        let objects = Objects::new(dir.path().join("objects"));
        let id = objects.put(b"hello").unwrap();
        assert_eq!(objects.put(b"hello").unwrap(), id);
        assert_eq!(objects.read(&id).unwrap(), b"hello");
        fs::write(objects.path(&id), b"torn").unwrap();
        let damaged = objects.read(&id).unwrap_err().to_string();
        assert!(damaged.contains("damaged"), "{damaged}");
        let missing = objects.read(&Objects::id_of(b"other")).unwrap_err();
        assert!(missing.to_string().contains("missing"), "{missing}");
    }
}
