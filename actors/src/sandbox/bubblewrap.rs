//! The outer layer: namespaces, through bubblewrap (`bwrap`, Debian's `bubblewrap`).
//!
//! Landlock alone cannot make a hole read-only inside a writable workspace, nor hide files
//! inside a readable tree; a mount namespace can. bubblewrap is the small, audited setuid-free
//! tool codex and Anthropic's sandbox-runtime use for it, and works for root and unprivileged
//! users alike (through a user namespace). Each command gets:
//! - a view of the filesystem: everything read-only, the writable places bound writable, the
//!   secrets covered (an empty read-only tmpfs over a directory, `/dev/null` over a file),
//!   git's hooks and config bound read-only and the git directory pinned;
//! - its own user, PID, IPC and UTS namespaces (it sees and signals only its own processes,
//!   all of which die with it), and without network its own network namespace, which has
//!   nothing but an unconnected loopback: no TCP, UDP, raw sockets or DNS, and no service of
//!   the host's loopback;
//! - a new session, no capabilities, and death with its parent.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What a command may see and do, as mounts and namespaces.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct View {
    pub writable: Vec<PathBuf>,
    pub hidden: Vec<PathBuf>,
    pub read_only: Vec<PathBuf>,
    /// Made mount points of themselves, so they cannot be renamed or removed.
    pub pinned: Vec<PathBuf>,
    pub network: bool,
    pub cwd: PathBuf,
    /// No user namespace can be made inside (`--disable-userns`, bubblewrap 0.8): a nested
    /// one would give the command the power to mount and to take namespaces apart.
    pub disable_userns: bool,
}

/// One mount of the view, in the order bubblewrap applies them.
#[derive(Clone, Debug, PartialEq)]
enum Mount {
    Writable(PathBuf),
    Pinned(PathBuf),
    HiddenDir(PathBuf),
    HiddenFile(PathBuf),
    ReadOnly(PathBuf),
}

impl Mount {
    fn path(&self) -> &Path {
        match self {
            Mount::Writable(p)
            | Mount::Pinned(p)
            | Mount::HiddenDir(p)
            | Mount::HiddenFile(p)
            | Mount::ReadOnly(p) => p,
        }
    }
}

impl View {
    /// The mounts, shallowest first: a mount over a directory comes before mounts inside it,
    /// so a workspace inside a hidden `$RYVOS_HOME` is bound over the cover, and a secret
    /// inside the workspace is covered after the workspace is bound. Of mounts at the same
    /// depth, covers come last.
    fn mounts(&self) -> Vec<Mount> {
        let mut mounts: Vec<Mount> = Vec::new();
        mounts.extend(self.writable.iter().cloned().map(Mount::Writable));
        mounts.extend(self.pinned.iter().cloned().map(Mount::Pinned));
        mounts.extend(self.read_only.iter().cloned().map(Mount::ReadOnly));
        for path in &self.hidden {
            mounts.push(match path.is_dir() {
                true => Mount::HiddenDir(path.clone()),
                false => Mount::HiddenFile(path.clone()),
            });
        }
        let rank = |m: &Mount| match m {
            Mount::Writable(_) => 0,
            Mount::Pinned(_) => 1,
            Mount::ReadOnly(_) => 2,
            Mount::HiddenDir(_) | Mount::HiddenFile(_) => 3,
        };
        mounts.sort_by_key(|m| (m.path().components().count(), rank(m)));
        mounts
    }

    /// bubblewrap's arguments for this view, up to and including the `--` before the command.
    pub(super) fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = [
            "--die-with-parent",
            "--new-session",
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--cap-drop",
            "ALL",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
        ]
        .map(OsString::from)
        .to_vec();
        if !self.network {
            args.push("--unshare-net".into());
        }
        if self.disable_userns {
            args.push("--disable-userns".into());
        }
        let mut covered = Vec::new();
        for mount in self.mounts() {
            let (flag, source): (&str, OsString) = match &mount {
                Mount::Writable(p) | Mount::Pinned(p) => ("--bind", p.into()),
                Mount::ReadOnly(p) => ("--ro-bind", p.into()),
                Mount::HiddenFile(_) => ("--ro-bind", "/dev/null".into()),
                Mount::HiddenDir(_) => ("--tmpfs", OsString::new()),
            };
            args.push(flag.into());
            if !source.is_empty() {
                args.push(source);
            }
            args.push(mount.path().into());
            if let Mount::HiddenDir(p) = &mount {
                covered.push(p.clone());
            }
        }
        // Covers are writable while mounts inside them are made; then they are sealed.
        for dir in covered {
            args.push("--remount-ro".into());
            args.push(dir.into());
        }
        args.push("--chdir".into());
        args.push(self.cwd.clone().into());
        args.push("--".into());
        args
    }
}

/// Where bubblewrap is: `RYVOS_BWRAP`, else `bwrap` on `PATH`.
pub(super) fn find() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("RYVOS_BWRAP") {
        return Some(PathBuf::from(path));
    }
    find_on_path("bwrap")
}

/// `program` on `PATH`, if it is there.
pub(super) fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// Whether `bwrap` can forbid user namespaces inside (`--disable-userns`, from 0.8); asked
/// once.
pub(super) fn disables_userns(bwrap: &Path) -> bool {
    static ASKED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ASKED.get_or_init(|| {
        std::process::Command::new(bwrap)
            .arg("--help")
            .output()
            .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("--disable-userns"))
    })
}

/// Whether bubblewrap can make the namespaces a command needs on this machine: it is run once
/// with the same kinds of namespaces (a kernel or a policy forbidding user namespaces shows
/// here, not at the first command), as `user` where commands run as another user than the
/// daemon's. `Err` says why not.
pub(super) fn probe(bwrap: &Path, user: Option<(u32, u32)>) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let view = View {
        cwd: "/".into(),
        disable_userns: disables_userns(bwrap),
        ..View::default()
    };
    let mut command = std::process::Command::new(bwrap);
    if let Some((uid, gid)) = user {
        command.uid(uid).gid(gid);
    }
    let output = command
        .current_dir("/")
        .args(view.args())
        .arg("true")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{} cannot be started: {e}", bwrap.display()))?;
    if output.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&output.stderr);
    Err(format!(
        "{} cannot make namespaces here ({}); unprivileged user namespaces may be disabled \
         (sysctl kernel.unprivileged_userns_clone=1, or an AppArmor profile for bwrap)",
        bwrap.display(),
        said.trim()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn mounts_go_shallowest_first_with_covers_sealed_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".ryvos/ws/.git/hooks")).unwrap();
        std::fs::write(home.join(".ryvos/config.toml"), "").unwrap();
        let ws = home.join(".ryvos/ws");
        let view = View {
            writable: vec![ws.clone()],
            hidden: vec![home.join(".ryvos"), home.join(".ryvos/config.toml")],
            read_only: vec![ws.join(".git/hooks")],
            pinned: vec![ws.join(".git")],
            network: false,
            disable_userns: true,
            cwd: ws.clone(),
        };
        let args = strings(&view.args());
        let at = |s: &str| args.iter().position(|a| a == s).unwrap();
        let p = |p: &Path| p.display().to_string();
        assert!(args.contains(&"--unshare-net".to_owned()));
        // The cover of the home, then the workspace bound inside it, then what is inside that.
        let cover = at("--tmpfs");
        assert_eq!(args[cover + 1], p(&home.join(".ryvos")));
        let bind = at(&p(&ws));
        assert!(cover < bind && args[bind - 1] == "--bind");
        let hooks = args.iter().rposition(|a| *a == p(&ws.join(".git/hooks")));
        assert!(bind < hooks.unwrap());
        assert_eq!(args[hooks.unwrap() - 2], "--ro-bind");
        let config = args
            .iter()
            .position(|a| *a == p(&home.join(".ryvos/config.toml")))
            .unwrap();
        assert_eq!(args[config - 1], "/dev/null");
        // Sealed, then the command.
        let seal = at("--remount-ro");
        assert!(seal > hooks.unwrap() && seal > config);
        assert_eq!(args.last().unwrap(), "--");
        assert_eq!(args[args.len() - 2], p(&ws));
    }

    #[test]
    fn network_true_keeps_the_hosts_network() {
        let view = View {
            network: true,
            cwd: "/".into(),
            ..View::default()
        };
        assert!(!strings(&view.args()).contains(&"--unshare-net".to_owned()));
    }
}
