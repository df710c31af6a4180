//! Who a command runs as. A daemon run by a user lends its commands that user, as a shell
//! would. A daemon run as root lends them nothing of root: they run as an unprivileged user
//! (`[security.sandbox] run_as`, `nobody` by default), so a file only root may read (`/etc/shadow`,
//! `/root`, `/etc/ssl/private`, a database's files) is as closed to them as to any user.
//!
//! The namespaces alone could not do this: in a user namespace made by root, a command is still
//! root's uid to the kernel, and the owner of every root-owned file. So the command's process
//! really changes its uid, after the daemon, still root in the child it forked, prepared its
//! view in a mount namespace of the child's own:
//! - the writable places (the workspace, the run's `TMPDIR`, `writable_paths`) are bound over
//!   themselves through an *idmapped mount* (`mount_setattr`, Linux 5.12) that shows root's
//!   files as the command's and stores the command's as root's. The command can write the
//!   workspace; what it makes there belongs to the daemon's user afterwards, as it would
//!   without this (set-id bits it cannot give: see [`super::seccomp`]); a `read-only`
//!   workspace is idmapped read-only; `allow_read` paths are reached as they are, their files
//!   readable as their modes let any user;
//! - a directory on the way to one of them that the command could not enter (`/root`, mode
//!   0700) is covered by an empty tmpfs holding just the way through: the command could read
//!   nothing else in it anyway;
//! - then the child drops to the user and becomes bubblewrap, which makes the command's
//!   namespaces unprivileged, as it does for any user.
//!
//! Where the kernel or the filesystem cannot make an idmapped mount, commands are refused, with
//! the reason and the knob (`run_as = "root"`, knowingly).

mod idmap;

use idmap::{make_idmap, try_idmap};
use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// The `run_as` that keeps root's power (dangerous).
pub(super) const ROOT: &str = "root";

/// The unprivileged user a root daemon's commands run as, and the user namespace whose mapping
/// (its uid 0 is the user's) idmaps their writable places; made once, at the first command.
#[derive(Debug)]
pub(super) struct Lender {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    idmap: OnceLock<Result<Arc<OwnedFd>, String>>,
    /// Whether each filesystem (by device) takes an idmapped mount, tried once.
    filesystems: Mutex<HashMap<u64, Result<(), String>>>,
}

impl Lender {
    /// The lender a daemon running as `euid` needs for `run_as`: none unless it runs as root
    /// and `run_as` is not `root`. A user that does not exist is an error naming it.
    pub(super) fn for_daemon(euid: u32, run_as: &str) -> Result<Option<Self>, String> {
        if euid != 0 || run_as == ROOT {
            return Ok(None);
        }
        let (uid, gid) = lookup(run_as)?;
        if uid == 0 {
            return Err(format!(
                "'{run_as}' is root; name an unprivileged user, or \"root\" knowingly"
            ));
        }
        Ok(Some(Self {
            name: run_as.to_owned(),
            uid,
            gid,
            idmap: OnceLock::new(),
            filesystems: Mutex::default(),
        }))
    }

    /// Who commands run as, for `status` and `doctor`.
    pub(super) fn describe(&self) -> String {
        format!(
            "commands run as {} ({}:{}), not root",
            self.name, self.uid, self.gid
        )
    }

    /// The user namespace that idmaps root's files to the user, made at the first use.
    fn idmap(&self) -> Result<Arc<OwnedFd>, String> {
        self.idmap
            .get_or_init(|| make_idmap(self.uid, self.gid).map(Arc::new))
            .clone()
    }

    /// What the child must do before it becomes bubblewrap: `writable` idmapped read-write,
    /// `readable` idmapped read-only, `programs` (bubblewrap, the inner layer) reachable as
    /// they are, and `cwd` entered again once the view is made.
    pub(super) fn lend(
        &self,
        writable: &[PathBuf],
        readable: &[PathBuf],
        programs: &[PathBuf],
        cwd: &Path,
    ) -> Result<Lending, String> {
        let idmap = self.idmap()?;
        let mut places: Vec<Place> = Vec::new();
        // As configured (resolved once, at start): never resolved again here, where a command
        // could have made a place a link to elsewhere. A place that is a link now, or that lies
        // inside a writable one (which lends it already, and whose contents the command may
        // swap), is not lent on its own.
        let mut add = |path: &Path, how: How| {
            let real = std::fs::symlink_metadata(path).is_ok_and(|m| !m.file_type().is_symlink());
            let inside_writable = places
                .iter()
                .any(|p| p.how == How::Writable && path.starts_with(&p.path));
            if real && !inside_writable && !places.iter().any(|p| p.path == path) {
                places.push(Place {
                    path: path.to_path_buf(),
                    how,
                });
            }
        };
        writable.iter().for_each(|p| add(p, How::Writable));
        readable.iter().for_each(|p| add(p, How::Readable));
        programs.iter().for_each(|p| add(p, How::AsItIs));
        for place in places.iter().filter(|p| p.how != How::AsItIs) {
            self.takes_idmap(&place.path, &idmap)?;
        }
        // Shallowest first: a place inside another is bound after it, over it.
        places.sort_by_key(|p| p.path.components().count());
        let covers = covers(&places, self.uid, self.gid);
        let mut steps = Steps::default();
        for place in &places {
            let covered = covers.iter().any(|c| place.path.starts_with(c));
            if place.how == How::AsItIs && !covered {
                continue;
            }
            if covered {
                for dir in place.path.ancestors().skip(1) {
                    if covers.iter().any(|c| c == dir) {
                        break;
                    }
                    steps.dirs.push(c_path(dir)?);
                }
                match place.path.is_dir() {
                    true => steps.dirs.push(c_path(&place.path)?),
                    false => steps.files.push(c_path(&place.path)?),
                }
            }
            steps.binds.push(Bind {
                path: c_path(&place.path)?,
                attr: match place.how {
                    How::Writable => libc::MOUNT_ATTR_IDMAP,
                    How::Readable => libc::MOUNT_ATTR_IDMAP | libc::MOUNT_ATTR_RDONLY,
                    How::AsItIs => 0,
                },
            });
        }
        steps
            .dirs
            .sort_by_key(|d| d.as_bytes().iter().filter(|b| **b == b'/').count());
        steps.dirs.dedup();
        steps.covers = covers.iter().map(|c| c_path(c)).collect::<Result<_, _>>()?;
        Ok(Lending {
            steps: Arc::new(steps),
            reached: places.into_iter().map(|p| p.path).collect(),
            idmap,
            uid: self.uid,
            gid: self.gid,
            cwd: c_path(cwd)?,
        })
    }
}

impl Lender {
    /// Whether the filesystem holding `path` takes an idmapped mount, tried once per
    /// filesystem in a child of its own; `Err` says why not, and what to do.
    fn takes_idmap(&self, path: &Path, idmap: &OwnedFd) -> Result<(), String> {
        let dev = std::fs::metadata(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .dev();
        let mut known = self.filesystems.lock().unwrap_or_else(|e| e.into_inner());
        known
            .entry(dev)
            .or_insert_with(|| {
                try_idmap(path, idmap).map_err(|e| {
                    format!(
                        "{} cannot be lent to {} through an idmapped mount ({e}; idmapped mounts \
                         need Linux 5.12 and a filesystem that has them: ext4, xfs, btrfs, tmpfs \
                         from 6.3). Put the workspace on such a filesystem, or knowingly set \
                         [security.sandbox] run_as = \"root\" (commands then read every \
                         root-only file)",
                        path.display(),
                        self.name
                    )
                })
            })
            .clone()
    }
}

/// How a place is made reachable.
#[derive(Clone, Copy, Debug, PartialEq)]
enum How {
    Writable,
    Readable,
    AsItIs,
}

#[derive(Debug)]
struct Place {
    path: PathBuf,
    how: How,
}

#[derive(Debug, Default)]
struct Steps {
    covers: Vec<CString>,
    dirs: Vec<CString>,
    files: Vec<CString>,
    binds: Vec<Bind>,
}

#[derive(Debug)]
struct Bind {
    path: CString,
    /// `MOUNT_ATTR_*` to set; 0 binds it as it is.
    attr: u64,
}

/// One command's view, prepared before the fork and made in the child (see [`Lending::apply`]).
#[derive(Clone, Debug)]
pub(super) struct Lending {
    steps: Arc<Steps>,
    /// The places made reachable.
    reached: Vec<PathBuf>,
    idmap: Arc<OwnedFd>,
    uid: u32,
    gid: u32,
    cwd: CString,
}

impl Lending {
    /// Whether the command can reach `path`: inside a place lent to it, or with every
    /// directory on the way open to it (a covered directory is closed, or it would not have
    /// been covered).
    pub(super) fn reaches(&self, path: &Path) -> bool {
        self.reached.iter().any(|p| path.starts_with(p))
            || path
                .ancestors()
                .skip(1)
                .all(|dir| enterable(dir, self.uid, self.gid))
    }

    /// Makes the view and drops to the user. Runs in the child between fork and exec, so only
    /// system calls on what was prepared before the fork: no allocation, no lock.
    pub(super) fn apply(&self) -> io::Result<()> {
        // SAFETY: plain system calls on NUL-terminated strings and integers made before the
        // fork; the child is single-threaded.
        unsafe {
            check(libc::unshare(libc::CLONE_NEWNS))?;
            // Nothing made here may reach the daemon's mount namespace.
            check(libc::mount(
                c"none".as_ptr(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
        }
        // The clones are taken before any cover hides what they are clones of.
        let mut trees: [RawFd; MAX_PLACES] = [-1; MAX_PLACES];
        self.clone_places(&mut trees)?;
        self.steps.make_covers()?;
        for (bind, tree) in self.steps.binds.iter().zip(trees) {
            // SAFETY: as above; `tree` is the clone made for `bind`.
            unsafe {
                check(libc::syscall(
                    libc::SYS_move_mount,
                    tree,
                    c"".as_ptr(),
                    libc::AT_FDCWD,
                    bind.path.as_ptr(),
                    libc::MOVE_MOUNT_F_EMPTY_PATH,
                ) as libc::c_int)?;
                libc::close(tree);
            }
        }
        // SAFETY: as above.
        unsafe {
            check(libc::setgroups(0, std::ptr::null()))?;
            check(libc::setgid(self.gid))?;
            check(libc::setuid(self.uid))?;
            // The working directory, seen through the new view and as the user.
            check(libc::chdir(self.cwd.as_ptr()))?;
        }
        Ok(())
    }

    /// A detached clone of each place in `trees`, idmapped where it is lent.
    fn clone_places(&self, trees: &mut [RawFd; MAX_PLACES]) -> io::Result<()> {
        if self.steps.binds.len() > MAX_PLACES {
            return Err(io::Error::from_raw_os_error(libc::E2BIG));
        }
        for (bind, tree) in self.steps.binds.iter().zip(trees.iter_mut()) {
            // SAFETY: as in `apply`; `attr` lives on the stack for the call.
            unsafe {
                *tree = check(libc::syscall(
                    libc::SYS_open_tree,
                    libc::AT_FDCWD,
                    bind.path.as_ptr(),
                    libc::OPEN_TREE_CLONE
                        | libc::OPEN_TREE_CLOEXEC
                        | libc::AT_SYMLINK_NOFOLLOW as libc::c_uint,
                ) as libc::c_int)?;
                if bind.attr != 0 {
                    let attr = libc::mount_attr {
                        attr_set: bind.attr,
                        attr_clr: 0,
                        propagation: 0,
                        userns_fd: self.idmap.as_raw_fd() as u64,
                    };
                    check(libc::syscall(
                        libc::SYS_mount_setattr,
                        *tree,
                        c"".as_ptr(),
                        libc::AT_EMPTY_PATH,
                        &attr as *const libc::mount_attr,
                        std::mem::size_of::<libc::mount_attr>(),
                    ) as libc::c_int)?;
                }
            }
        }
        Ok(())
    }
}

impl Steps {
    /// The covers over closed directories, and the way through them to each place.
    fn make_covers(&self) -> io::Result<()> {
        // SAFETY: as in `Lending::apply`.
        unsafe {
            for cover in &self.covers {
                check(libc::mount(
                    c"tmpfs".as_ptr(),
                    cover.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    c"mode=0755,size=64k".as_ptr().cast(),
                ))?;
            }
            for dir in &self.dirs {
                if libc::mkdir(dir.as_ptr(), 0o755) != 0
                    && io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST)
                {
                    return Err(io::Error::last_os_error());
                }
            }
            for file in &self.files {
                let fd = libc::open(
                    file.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o644,
                );
                if fd >= 0 {
                    libc::close(fd);
                }
            }
        }
        Ok(())
    }
}

/// Places one command may be lent: the workspace, `TMPDIR`, the programs, and the configured
/// lists, with room to spare.
const MAX_PLACES: usize = 64;

fn check(result: libc::c_int) -> io::Result<libc::c_int> {
    match result {
        -1 => Err(io::Error::last_os_error()),
        n => Ok(n),
    }
}

fn c_path(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{} holds a NUL byte", path.display()))
}

/// The shallowest directory on the way to each place that `uid`/`gid` could not enter.
fn covers(places: &[Place], uid: u32, gid: u32) -> Vec<PathBuf> {
    let mut covers: Vec<PathBuf> = Vec::new();
    for place in places {
        let mut ancestors: Vec<&Path> = place.path.ancestors().skip(1).collect();
        ancestors.reverse();
        let closed = ancestors.into_iter().find(|dir| !enterable(dir, uid, gid));
        if let Some(dir) = closed {
            if !covers.iter().any(|c| dir.starts_with(c)) {
                covers.retain(|c| !c.starts_with(dir));
                covers.push(dir.to_path_buf());
            }
        }
    }
    covers
}

/// Whether `uid` (in group `gid`, no other) may pass through `dir`, by its mode bits.
fn enterable(dir: &Path, uid: u32, gid: u32) -> bool {
    let Ok(meta) = std::fs::metadata(dir) else {
        return false;
    };
    let mode = meta.mode();
    let bit = if meta.uid() == uid {
        0o100
    } else if meta.gid() == gid {
        0o010
    } else {
        0o001
    };
    mode & bit != 0
}

/// `name` (or `uid:gid`, or a bare uid) as a uid and its primary gid.
fn lookup(name: &str) -> Result<(u32, u32), String> {
    if let Some((uid, gid)) = name.split_once(':') {
        if let (Ok(uid), Ok(gid)) = (uid.parse(), gid.parse()) {
            return Ok((uid, gid));
        }
    }
    let passwd = std::fs::read_to_string("/etc/passwd")
        .map_err(|e| format!("/etc/passwd cannot be read to find '{name}': {e}"))?;
    passwd
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            let ids = (fields.get(2)?.parse().ok()?, fields.get(3)?.parse().ok()?);
            Some((fields[0], ids))
        })
        .find(|(user, (uid, _)): &(&str, (u32, u32))| {
            *user == name || name.parse::<u32>() == Ok(*uid)
        })
        .map(|(_, ids)| ids)
        .ok_or_else(|| {
            format!("no user '{name}' on this machine; name one that exists (or uid:gid)")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn users_are_found_by_name_by_id_and_as_a_pair() {
        assert_eq!(lookup("root").unwrap(), (0, 0));
        assert_eq!(lookup("0").unwrap(), (0, 0));
        assert_eq!(lookup("1234:99").unwrap(), (1234, 99));
        let missing = lookup("no-such-user-here").unwrap_err();
        assert!(missing.contains("no-such-user-here"), "{missing}");
    }

    #[test]
    fn a_daemon_that_is_not_root_or_keeps_root_lends_nothing() {
        assert!(Lender::for_daemon(1000, "nobody").unwrap().is_none());
        assert!(Lender::for_daemon(0, ROOT).unwrap().is_none());
        assert!(Lender::for_daemon(0, "0:0").is_err());
        assert!(Lender::for_daemon(0, "no-such-user-here").is_err());
    }

    #[test]
    fn the_shallowest_closed_directory_on_the_way_is_covered() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        let closed = open.join("closed");
        let deeper = closed.join("also-closed/ws");
        std::fs::create_dir_all(&deeper).unwrap();
        std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&open, PermissionsExt::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&closed, PermissionsExt::from_mode(0o700)).unwrap();
        std::fs::set_permissions(closed.join("also-closed"), PermissionsExt::from_mode(0o700))
            .unwrap();
        let places = [Place {
            path: deeper.clone(),
            how: How::Writable,
        }];
        // Whoever owns the temporary directory, an id nobody has cannot enter `closed`.
        let ancestors_open = dir
            .path()
            .ancestors()
            .all(|a| enterable(a, 4_000_000, 4_000_000));
        let covers = covers(&places, 4_000_000, 4_000_000);
        if ancestors_open {
            assert_eq!(covers, vec![closed]);
        } else {
            assert_eq!(covers.len(), 1);
            assert!(closed.starts_with(&covers[0]));
        }
    }
}
