//! One daemon per home.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::Path;

/// An exclusive lock on `$RYVOS_HOME/ryvosd.lock`, held for the daemon's life; the kernel
/// releases it when the process dies, however it dies.
pub struct HomeLock {
    _file: File,
}

impl HomeLock {
    /// Takes the lock, or says which daemon holds it.
    pub fn acquire(home: &Path) -> Result<Self, String> {
        let path = home.join("ryvosd.lock");
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| format!("opening {}: {e}", path.display()))?;
        // SAFETY: flock on a descriptor we own; it does not touch memory.
        let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        if !locked {
            let mut holder = String::new();
            file.read_to_string(&mut holder).ok();
            let holder = holder.trim();
            let who = if holder.is_empty() {
                String::new()
            } else {
                format!(" (pid {holder})")
            };
            return Err(format!(
                "another ryvosd is already running on {}{who}; stop it with `ryvos shutdown`, or \
                 use another RYVOS_HOME",
                home.display()
            ));
        }
        file.set_len(0)
            .and_then(|_| file.rewind())
            .and_then(|_| write!(file, "{}", std::process::id()))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        Ok(Self { _file: file })
    }
}
