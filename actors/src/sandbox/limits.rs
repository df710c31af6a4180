//! Per-command limits: at most `max_processes` processes and `max_memory_mb` of memory for a
//! command and all its descendants together, so a fork bomb or a runaway allocation stops at
//! the command instead of freezing the machine.
//!
//! The best mechanism the machine offers is used:
//! - cgroup v2, where the daemon's cgroup is delegated to it (systemd's `Delegate=yes`): the
//!   daemon moves itself into a leaf (`daemon`), enables `pids` and `memory` for its subtree,
//!   and each command gets a cgroup beside it with `pids.max` and `memory.max`;
//! - cgroup v1, where the daemon may make cgroups in the `pids` and `memory` hierarchies (root
//!   on a v1 machine): the same with `pids.max` and `memory.limit_in_bytes`;
//! - otherwise rlimits, set by the inner layer inside the command's own user namespace:
//!   `RLIMIT_NPROC` counts only the command's processes there (the user's others live in
//!   another namespace), and `RLIMIT_AS` caps each process's memory (per process, not the
//!   command's total: the weakest of the three, and `doctor` says so).
//!
//! A command's cgroup is joined between fork and exec (bubblewrap and everything it starts are
//! in it), and removed, with anything left in it killed, when the command is done with.

use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The limits of every command, and how they are enforced.
#[derive(Debug)]
pub(super) struct Limits {
    pub max_processes: u64,
    /// Bytes.
    pub max_memory: u64,
    pub mechanism: Mechanism,
    next: AtomicU64,
    /// The directories made for this sandbox, removed once it and its commands are gone.
    base: Arc<Base>,
    /// Under cgroup v2: this sandbox's directory, made at the first command.
    divided: std::sync::OnceLock<Result<(PathBuf, Arc<Base>), String>>,
}

/// Directories removed when the last holder lets go (see [`Limits::base`]).
#[derive(Debug, Default)]
struct Base(Vec<PathBuf>);

impl Drop for Base {
    fn drop(&mut self) {
        for dir in &self.0 {
            if let Err(e) = std::fs::remove_dir(dir) {
                tracing::debug!("{} stays: {e}", dir.display());
            }
        }
    }
}

/// How the limits are enforced on this machine.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Mechanism {
    /// Commands' cgroups go in this directory, beside the daemon's leaf.
    CgroupV2(PathBuf),
    /// Commands' cgroups go in these directories of the two hierarchies.
    CgroupV1 { pids: PathBuf, memory: PathBuf },
    /// The inner layer sets rlimits.
    Rlimits,
}

impl Limits {
    /// The limits, on the best mechanism this machine offers the daemon.
    pub(super) fn detect(max_processes: u64, max_memory_mb: u64) -> Self {
        let max_memory = match max_memory_mb {
            0 => machine_memory() / 2,
            mb => mb.saturating_mul(1024 * 1024),
        };
        let mechanism = cgroup_v2().or_else(cgroup_v1).unwrap_or(Mechanism::Rlimits);
        let base = match &mechanism {
            Mechanism::CgroupV1 { pids, memory } => Base(vec![pids.clone(), memory.clone()]),
            _ => Base::default(),
        };
        Self {
            max_processes,
            max_memory,
            mechanism,
            next: AtomicU64::new(0),
            base: Arc::new(base),
            divided: std::sync::OnceLock::new(),
        }
    }

    /// What holds, in a few words.
    pub(super) fn describe(&self) -> String {
        let how = match &self.mechanism {
            Mechanism::CgroupV2(_) => "per command, by cgroup v2",
            Mechanism::CgroupV1 { .. } => "per command, by cgroup v1",
            Mechanism::Rlimits => {
                "processes per command and memory per process, by rlimits (no delegated \
                 cgroup: give ryvosd.service Delegate=yes)"
            }
        };
        format!(
            "at most {} processes and {} MiB ({how})",
            self.max_processes,
            self.max_memory / (1024 * 1024)
        )
    }

    /// A cgroup for one command, made now; `None` under rlimits.
    pub(super) fn cgroup(&self) -> io::Result<Option<Cgroup>> {
        let name = format!("cmd-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let made = match &self.mechanism {
            Mechanism::Rlimits => return Ok(None),
            Mechanism::CgroupV2(own) => {
                let divided = self.divided.get_or_init(|| {
                    divide_v2(own)
                        .map(|base| (base.clone(), Arc::new(Base(vec![base]))))
                        .map_err(|e| format!("dividing {}: {e}", own.display()))
                });
                let (parent, base) = divided.as_ref().map_err(|e| io::Error::other(e.clone()))?;
                let dir = parent.join(&name);
                let cgroup = Cgroup::make(vec![dir.clone()], base)?;
                write(&dir.join("pids.max"), &self.max_processes.to_string())?;
                write(&dir.join("memory.max"), &self.max_memory.to_string())?;
                no_swap(&dir.join("memory.swap.max"), "0");
                cgroup
            }
            Mechanism::CgroupV1 { pids, memory } => {
                let (p, m) = (pids.join(&name), memory.join(&name));
                let cgroup = Cgroup::make(vec![p.clone(), m.clone()], &self.base)?;
                write(&p.join("pids.max"), &self.max_processes.to_string())?;
                write(
                    &m.join("memory.limit_in_bytes"),
                    &self.max_memory.to_string(),
                )?;
                no_swap(
                    &m.join("memory.memsw.limit_in_bytes"),
                    &self.max_memory.to_string(),
                );
                cgroup
            }
        };
        Ok(Some(made))
    }
}

/// One command's cgroup (one directory per hierarchy), removed when dropped.
#[derive(Debug)]
pub(super) struct Cgroup {
    dirs: Vec<PathBuf>,
    /// Held so the sandbox's own directories outlive this one.
    base: Arc<Base>,
    /// Each directory's `cgroup.procs`, ready for the child to write to between fork and exec.
    procs: Vec<CString>,
}

impl Cgroup {
    fn make(dirs: Vec<PathBuf>, base: &Arc<Base>) -> io::Result<Self> {
        let mut made = Self {
            dirs: Vec::new(),
            base: base.clone(),
            procs: Vec::new(),
        };
        for dir in dirs {
            create_fresh(&dir)?;
            let procs = dir.join("cgroup.procs");
            made.dirs.push(dir);
            made.procs.push(
                CString::new(procs.as_os_str().as_encoded_bytes())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
            );
        }
        Ok(made)
    }

    /// The files the child writes "0" to, joining the cgroup (see [`join`]).
    pub(super) fn procs_files(&self) -> Vec<CString> {
        self.procs.clone()
    }

    /// The knob of the limit the command met, if the cgroup counted one.
    pub(super) fn limit_met(&self) -> Option<&'static str> {
        for dir in &self.dirs {
            if counter(&dir.join("pids.events"), "max") > 0 {
                return Some("max_processes");
            }
            let oom_killed = counter(&dir.join("memory.events"), "oom_kill") > 0
                || counter(&dir.join("memory.oom_control"), "oom_kill") > 0;
            if oom_killed {
                return Some("max_memory_mb");
            }
        }
        None
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let dirs = std::mem::take(&mut self.dirs);
        let base = self.base.clone();
        // Killing what is left and waiting for the kernel to let go may take a moment: done off
        // the async workers.
        let remove = move || {
            remove_cgroups(&dirs);
            drop(base);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(remove);
            }
            Err(_) => remove(),
        }
    }
}

/// Kills every process left in `dirs` and removes them, trying for a second at most (dying
/// processes leave their cgroup a little after the signal).
fn remove_cgroups(dirs: &[PathBuf]) {
    for dir in dirs {
        for attempt in 0..50 {
            kill_all(dir);
            match std::fs::remove_dir(dir) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(e) if attempt == 49 => {
                    tracing::warn!("the command's cgroup {} stays: {e}", dir.display())
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
    }
}

fn kill_all(dir: &Path) {
    if write(&dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) else {
        return;
    };
    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        // SAFETY: kill only sends a signal.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Joins the cgroups whose `cgroup.procs` are `files`: runs in the child between fork and
/// exec, so only async-signal-safe calls (open, write, close) on prepared strings.
pub(super) fn join(files: &[CString]) -> io::Result<()> {
    for file in files {
        // SAFETY: a NUL-terminated path made before the fork; plain system calls.
        unsafe {
            let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            let written = libc::write(fd, b"0".as_ptr().cast(), 1);
            libc::close(fd);
            if written != 1 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Keeps a command from spilling into swap past its limit, where the kernel accounts swap (a
/// machine without swap accounting has no such file, and nothing to spill into it).
fn no_swap(path: &Path, value: &str) {
    if let Err(e) = write(path, value) {
        tracing::debug!("{}: {e}", path.display());
    }
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    std::fs::write(path, value)
}

/// The value of `key` in a flat keyed file (`max 3`, `oom_kill 1`); 0 when absent.
fn counter(path: &Path, key: &str) -> u64 {
    let Ok(text) = std::fs::read_to_string(path) else {
        return 0;
    };
    parse_counter(&text, key)
}

fn parse_counter(text: &str, key: &str) -> u64 {
    text.lines()
        .filter_map(|line| line.split_once(' '))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The machine's memory, in bytes.
fn machine_memory() -> u64 {
    // SAFETY: sysconf only reads system values.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages.max(0) as u64).saturating_mul(size.max(0) as u64)
}

/// This process's cgroup in `hierarchy` ("" for v2's unified one), from `/proc/self/cgroup`.
fn own_cgroup(text: &str, hierarchy: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == hierarchy)
            .then(|| path.to_owned())
    })
}

/// cgroup v2, where this process's cgroup is delegated to it and offers `pids` and `memory`
/// (divided at the first command: see [`divide_v2`]).
fn cgroup_v2() -> Option<Mechanism> {
    let root = Path::new("/sys/fs/cgroup");
    if !root.join("cgroup.controllers").exists() {
        return None;
    }
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own_cgroup(&text, "")?;
    let dir = root.join(own.trim_start_matches('/'));
    let controllers = std::fs::read_to_string(dir.join("cgroup.controllers")).ok()?;
    let offered: Vec<&str> = controllers.split_whitespace().collect();
    if !offered.contains(&"pids") || !offered.contains(&"memory") {
        return None;
    }
    // The root cgroup, or a cgroup not ours to divide, is left alone.
    if dir == root || !writable(&dir.join("cgroup.subtree_control")) {
        return None;
    }
    remove_stale(&dir);
    Some(Mechanism::CgroupV2(dir))
}

/// Divides this process's own cgroup `dir` for commands, at the first command (so a process
/// that never runs one, `ryvos doctor` say, stays where it is): the process moves into a leaf
/// of its own (`daemon`: a cgroup with processes cannot hand controllers to its children),
/// `pids` and `memory` are handed down, and this sandbox gets a directory of its own, under
/// which its commands' cgroups go.
fn divide_v2(dir: &Path) -> io::Result<PathBuf> {
    let leaf = dir.join("daemon");
    if !leaf.exists() {
        std::fs::create_dir(&leaf)?;
    }
    write(&leaf.join("cgroup.procs"), &std::process::id().to_string())?;
    write(&dir.join("cgroup.subtree_control"), "+pids +memory")?;
    let base = dir.join(sandbox_directory_name());
    create_fresh(&base)?;
    write(&base.join("cgroup.subtree_control"), "+pids +memory")?;
    Ok(base)
}

/// Makes the cgroup `dir`. One left there by a process that was killed (a daemon's pid used
/// again, the same name made again) holds no process any more: it is removed, with the
/// commands' cgroups it kept, and made anew.
fn create_fresh(dir: &Path) -> io::Result<()> {
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            clear(dir);
            std::fs::remove_dir(dir)?;
            std::fs::create_dir(dir)
        }
        made => made,
    }
}

/// Removes the cgroups under `dir` that hold no process (a live one refuses, as it should).
fn clear(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            clear(&entry.path());
            if let Err(e) = std::fs::remove_dir(entry.path()) {
                tracing::debug!("{} stays: {e}", entry.path().display());
            }
        }
    }
}

/// `ryvos-PID-N`: one directory per sandbox, as a process may hold several (an embedding host,
/// tests), and a daemon that died leaves its own to be swept.
fn sandbox_directory_name() -> String {
    static SANDBOXES: AtomicU64 = AtomicU64::new(0);
    format!(
        "ryvos-{}-{}",
        std::process::id(),
        SANDBOXES.fetch_add(1, Ordering::Relaxed)
    )
}

/// cgroup v1, where this process may make cgroups in the `pids` and `memory` hierarchies.
fn cgroup_v1() -> Option<Mechanism> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let base = sandbox_directory_name();
    let mut dirs = Vec::new();
    for hierarchy in ["pids", "memory"] {
        let mount = Path::new("/sys/fs/cgroup").join(hierarchy);
        let own = own_cgroup(&text, hierarchy)?;
        let parent = mount.join(own.trim_start_matches('/'));
        let dir = parent.join(&base);
        if !mount.join("cgroup.procs").exists() {
            return None;
        }
        remove_stale(&parent);
        // A directory still held (an orphaned command of a killed daemon with this pid) is
        // used as it is.
        if create_fresh(&dir).is_err() && !dir.exists() {
            return None;
        }
        dirs.push(dir);
    }
    let memory = dirs.pop()?;
    let pids = dirs.pop()?;
    Some(Mechanism::CgroupV1 { pids, memory })
}

/// Removes what daemons that died without cleaning up left in `parent`: empty `ryvos-PID-N`
/// directories of processes that are gone.
fn remove_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("ryvos-"))
            .and_then(|n| n.split('-').next())
            .filter(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if Path::new("/proc").join(pid).exists() {
            continue;
        }
        // Its commands' cgroups first (a killed daemon left them); fails, as it should, while
        // one still holds a process.
        clear(&entry.path());
        if let Err(e) = std::fs::remove_dir(entry.path()) {
            tracing::debug!("{} stays: {e}", entry.path().display());
        }
    }
}

fn writable(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path; access only checks.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_own_cgroup_is_read_per_hierarchy() {
        let text = "9:name=systemd:/\n8:pids:/user.slice\n4:memory:/a/b\n0::/system.slice/ryvosd.service\n";
        assert_eq!(own_cgroup(text, "pids").as_deref(), Some("/user.slice"));
        assert_eq!(own_cgroup(text, "memory").as_deref(), Some("/a/b"));
        assert_eq!(
            own_cgroup(text, "").as_deref(),
            Some("/system.slice/ryvosd.service")
        );
        assert_eq!(own_cgroup(text, "cpu"), None);
    }

    #[test]
    fn counters_are_read_by_key() {
        let events = "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n";
        assert_eq!(parse_counter(events, "oom_kill"), 1);
        assert_eq!(parse_counter(events, "max"), 4);
        assert_eq!(parse_counter(events, "absent"), 0);
    }

    /// A killed daemon leaves its cgroups; a process that gets its pid again makes the same
    /// names, and must get them, fresh.
    #[test]
    fn a_cgroup_a_killed_process_left_is_made_anew() {
        let text = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let Some(own) = own_cgroup(&text, "pids") else {
            return eprintln!("no cgroup v1 pids hierarchy here: nothing to check");
        };
        let parent = Path::new("/sys/fs/cgroup/pids").join(own.trim_start_matches('/'));
        if !writable(&parent.join("cgroup.procs")) {
            return eprintln!(
                "{} is not ours to divide: nothing to check",
                parent.display()
            );
        }
        let dir = parent.join(format!("ryvos-test-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        std::fs::create_dir(dir.join("cmd-0")).unwrap();
        create_fresh(&dir).unwrap();
        assert!(dir.join("cgroup.procs").exists(), "made anew");
        assert!(!dir.join("cmd-0").exists(), "what it held is gone");
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn no_memory_limit_given_is_half_the_machine() {
        let limits = Limits::detect(512, 0);
        assert_eq!(limits.max_memory, machine_memory() / 2);
        assert!(limits.max_memory > 0);
        assert_eq!(Limits::detect(512, 1024).max_memory, 1 << 30);
    }
}
