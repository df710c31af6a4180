//! Test hook: a database file whose writes can be made to fail as a full disk fails them
//! (`ENOSPC`), so the store's recovery from I/O errors is tried deterministically, through
//! redb's own error handling. The switch is per file path and outlives the database, so a
//! reopened database fails (or not) as the one before it did.

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};
use std::collections::HashMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

/// The switch of every database file opened in this process, by path.
static SWITCHES: LazyLock<Mutex<HashMap<PathBuf, Arc<AtomicBool>>>> = LazyLock::new(Mutex::default);

/// Turns failing writes on or off for the database file at `path`.
pub fn fail_writes(path: &Path, fail: bool) {
    switch(path).store(fail, Ordering::SeqCst);
}

fn switch(path: &Path) -> Arc<AtomicBool> {
    let key = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut switches = SWITCHES.lock().unwrap_or_else(|e| e.into_inner());
    switches.entry(key).or_default().clone()
}

/// redb's file backend, with writes that fail while the file's switch is on.
#[derive(Debug)]
pub(super) struct Backend {
    file: FileBackend,
    failing: Arc<AtomicBool>,
}

impl Backend {
    /// Opens (or creates) the file at `path`.
    pub(super) fn open(path: &Path) -> std::io::Result<Backend> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let file = FileBackend::new(file).map_err(std::io::Error::other)?;
        Ok(Backend {
            file,
            failing: switch(path),
        })
    }

    fn check(&self) -> std::io::Result<()> {
        if self.failing.load(Ordering::SeqCst) {
            // ENOSPC: what a full disk answers.
            return Err(std::io::Error::from_raw_os_error(28));
        }
        Ok(())
    }
}

impl StorageBackend for Backend {
    fn len(&self) -> std::io::Result<u64> {
        self.file.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.file.read(offset, out)
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.check()?;
        self.file.set_len(len)
    }

    fn sync_data(&self) -> std::io::Result<()> {
        self.check()?;
        self.file.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.check()?;
        self.file.write(offset, data)
    }

    fn close(&self) -> std::io::Result<()> {
        self.file.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.file.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.file.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.file.query_lock_range(start, end)
    }
}
