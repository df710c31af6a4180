//! A run's private temporary directory: made (mode 0700) at the run's first command, exported
//! as `TMPDIR`, writable inside the sandbox, and removed when the last holder of the run's
//! sandbox lets go of it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The directory, once made.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    dir: Mutex<Option<tempfile::TempDir>>,
}

impl Scratch {
    /// The directory, made now if it was not yet.
    pub(super) fn path(&self) -> Result<PathBuf, String> {
        let mut dir = self.dir.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(made) = dir.as_ref() {
            return Ok(made.path().to_path_buf());
        }
        let made = tempfile::Builder::new()
            .prefix("ryvos-run-")
            .tempdir()
            .map_err(|e| format!("in {}: {e}", std::env::temp_dir().display()))?;
        let path = made.path().to_path_buf();
        *dir = Some(made);
        Ok(path)
    }

    /// The directory, if it was made.
    pub(super) fn created(&self) -> Option<PathBuf> {
        let dir = self.dir.lock().unwrap_or_else(|e| e.into_inner());
        dir.as_ref().map(|d| d.path().to_path_buf())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let Some(dir) = self.dir.get_mut().ok().and_then(Option::take) else {
            return;
        };
        // What a command left there may be large: removed off the async workers.
        let remove = move || {
            let path: PathBuf = dir.path().to_path_buf();
            if let Err(e) = dir.close() {
                tracing::warn!(
                    "the run's temporary directory {} could not be removed: {e}",
                    Path::new(&path).display()
                );
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(remove);
            }
            Err(_) => remove(),
        }
    }
}
