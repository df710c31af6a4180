//! One daemon per home.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a daemon waits for the lock of one that stopped.
const STALE_LOCK_PATIENCE: Duration = Duration::from_secs(10);

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
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("opening {}: {e}", path.display()))?;
        let deadline = Instant::now() + STALE_LOCK_PATIENCE;
        let mut waiting = false;
        loop {
            // SAFETY: flock on a descriptor we own; it does not touch memory.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                break;
            }
            let holder = holder(&mut file);
            // The daemon that took it is gone, but the lock is still held: a program it was
            // starting holds its descriptor between fork and exec, for a moment.
            let stale = holder.is_some_and(|pid| !alive(pid));
            if !stale || Instant::now() >= deadline {
                let who = holder
                    .map(|pid| format!(" (pid {pid})"))
                    .unwrap_or_default();
                return Err(format!(
                    "another ryvosd is already running on {}{who}; stop it with `ryvos \
                     shutdown`, or use another RYVOS_HOME",
                    home.display()
                ));
            }
            if !waiting {
                tracing::warn!(
                    "the lock of a ryvosd that stopped is still held, most likely by a program \
                     it was starting; waiting up to {STALE_LOCK_PATIENCE:?}"
                );
                waiting = true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        file.set_len(0)
            .and_then(|_| file.rewind())
            .and_then(|_| write!(file, "{}", std::process::id()))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        Ok(Self { _file: file })
    }
}

/// The pid the lock's holder wrote, if it wrote one.
fn holder(file: &mut File) -> Option<i32> {
    let mut text = String::new();
    file.rewind().ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// Whether process `pid` exists.
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let sent = unsafe { libc::kill(pid, 0) };
    sent == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}
