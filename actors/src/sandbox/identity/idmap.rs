//! The user namespace an idmapped mount maps through, and the trial of a filesystem for one.

use super::c_path;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// A user namespace whose uid 0 and gid 0 are `uid` and `gid`: an idmapped mount through it
/// shows root's files as the user's, and stores what the user makes as root's. A child made
/// for the purpose enters a new user namespace, the daemon writes its mapping and keeps a
/// handle on it, and the child exits.
pub(super) fn make_idmap(uid: u32, gid: u32) -> Result<OwnedFd, String> {
    let pipe = || -> Result<(OwnedFd, OwnedFd), String> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two descriptors, which are then owned here.
        match unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } {
            0 => Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }),
            _ => Err(format!("pipe: {}", io::Error::last_os_error())),
        }
    };
    let (ready_read, ready_write) = pipe()?;
    let (go_read, go_write) = pipe()?;
    // SAFETY: the child makes only async-signal-safe system calls, then exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: as above; the child never returns into Rust code.
        unsafe {
            // The parent's ends: held here too, the child would never see the parent close.
            libc::close(go_write.as_raw_fd());
            libc::close(ready_read.as_raw_fd());
            let entered = [u8::from(libc::unshare(libc::CLONE_NEWUSER) == 0)];
            libc::write(ready_write.as_raw_fd(), entered.as_ptr().cast(), 1);
            let mut byte = [0u8];
            libc::read(go_read.as_raw_fd(), byte.as_mut_ptr().cast(), 1);
            libc::_exit(0);
        }
    }
    drop(ready_write);
    drop(go_read);
    let made = (|| {
        let mut entered = [0u8];
        // SAFETY: reads one byte into a local buffer.
        let n = unsafe { libc::read(ready_read.as_raw_fd(), entered.as_mut_ptr().cast(), 1) };
        if n != 1 || entered[0] != 1 {
            return Err(
                "a user namespace could not be made (user namespaces may be disabled: \
                 sysctl user.max_user_namespaces)"
                    .to_owned(),
            );
        }
        let proc = PathBuf::from(format!("/proc/{pid}"));
        std::fs::write(proc.join("uid_map"), format!("0 {uid} 1\n"))
            .map_err(|e| format!("the user namespace's uid_map: {e}"))?;
        std::fs::write(proc.join("gid_map"), format!("0 {gid} 1\n"))
            .map_err(|e| format!("the user namespace's gid_map: {e}"))?;
        std::fs::File::open(proc.join("ns/user"))
            .map(OwnedFd::from)
            .map_err(|e| format!("the user namespace: {e}"))
    })();
    // Told by a byte, not by the pipe's end: a child forked meanwhile by another thread holds
    // a copy of this pipe's write end, so its end alone would never reach the child.
    // SAFETY: writes one byte from a local buffer.
    unsafe { libc::write(go_write.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
    drop(go_write);
    let mut status = 0;
    // SAFETY: waits for the child made above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    made
}

/// Makes an idmapped clone of `path` in a child's own mount namespace, and throws it away.
pub(super) fn try_idmap(path: &Path, idmap: &OwnedFd) -> Result<(), io::Error> {
    let path = c_path(path).map_err(io::Error::other)?;
    let userns = idmap.as_raw_fd();
    // SAFETY: the child makes only system calls on what was made before the fork, then exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: as above; the child never returns into Rust code.
        unsafe {
            let errno = || *libc::__errno_location();
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                libc::_exit(errno());
            }
            let tree = libc::syscall(
                libc::SYS_open_tree,
                libc::AT_FDCWD,
                path.as_ptr(),
                libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC,
            ) as libc::c_int;
            if tree < 0 {
                libc::_exit(errno());
            }
            let attr = libc::mount_attr {
                attr_set: libc::MOUNT_ATTR_IDMAP,
                attr_clr: 0,
                propagation: 0,
                userns_fd: userns as u64,
            };
            let set = libc::syscall(
                libc::SYS_mount_setattr,
                tree,
                c"".as_ptr(),
                libc::AT_EMPTY_PATH,
                &attr as *const libc::mount_attr,
                std::mem::size_of::<libc::mount_attr>(),
            );
            libc::_exit(if set == 0 { 0 } else { errno() });
        }
    }
    let mut status = 0;
    // SAFETY: waits for the child made above.
    if unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
        Some(0) => Ok(()),
        Some(errno) => Err(io::Error::from_raw_os_error(errno)),
        None => Err(io::Error::other("the trial ended by a signal")),
    }
}

#[cfg(test)]
mod tests {
    use super::make_idmap;

    /// Many threads making user namespaces at once: each helper child inherits the others'
    /// pipes, which must not keep any of them waiting. Needs root (it writes the maps).
    #[test]
    fn user_namespaces_made_at_once_by_many_threads_all_finish() {
        // SAFETY: geteuid only reads the caller's id.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: writing another user's map needs root");
            return;
        }
        let (done, finished) = std::sync::mpsc::channel();
        for _ in 0..8 {
            let done = done.clone();
            std::thread::spawn(move || {
                for _ in 0..10 {
                    let made = make_idmap(65534, 65534);
                    done.send(made.is_ok()).unwrap();
                }
            });
        }
        for n in 0..80 {
            let made = finished.recv_timeout(std::time::Duration::from_secs(60));
            assert!(
                made.is_ok(),
                "namespace {n} of 80 was never finished: a child hangs"
            );
        }
    }
}
