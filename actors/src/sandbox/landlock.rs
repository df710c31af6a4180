//! Landlock, as the sandbox's inner layer uses it: a ruleset built through the `landlock` crate
//! (maintained by Landlock's authors), then `prctl(PR_SET_NO_NEW_PRIVS)` and
//! `landlock_restrict_self(fd)`. The descriptor is close-on-exec.

use super::{SandboxError, ABI_FILES};
use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

/// The file rights a confined command has: those of ABI 3, truncation included.
const FILES: ABI = ABI::V3;
const NETWORK: ABI = ABI::V4;

/// Device files every program may write to, wherever the mode allows writes.
const WRITABLE_DEVICES: [&str; 3] = ["/dev/null", "/dev/zero", "/dev/full"];

/// The kernel's Landlock ABI; 0 when it has none.
pub(super) fn kernel_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: with a null attribute, size 0 and the version flag, the call only reports the
    // ABI version; it touches no memory.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(version).unwrap_or(0).max(0)
}

/// The ruleset of a confined command: read everything, write only under `writable`, and
/// without `network` no TCP connect or bind, but connecting to `proxy_port` when given.
pub(super) fn ruleset(
    writable: &[PathBuf],
    network: bool,
    proxy_port: Option<u16>,
) -> Result<OwnedFd, SandboxError> {
    let prepare = |e: &dyn std::fmt::Display| SandboxError::Prepare(e.to_string());
    // A hard requirement: a kernel that cannot enforce every right asked for is an error here,
    // never a weaker sandbox.
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(FILES))
        .map_err(|e| prepare(&e))?;
    if !network {
        // Handled with no rule allowing any port: every TCP connect and bind is denied.
        ruleset = ruleset
            .handle_access(AccessNet::from_all(NETWORK))
            .map_err(|e| prepare(&e))?;
    }
    // Where the kernel has them (ABI 6): no signals to processes outside the sandbox (the
    // daemon among them), no abstract unix sockets created outside it.
    let ruleset = ruleset
        .set_compatibility(CompatLevel::BestEffort)
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .map_err(|e| prepare(&e))?
        .set_compatibility(CompatLevel::HardRequirement);
    let mut created = ruleset
        .create()
        .map_err(|e| prepare(&e))?
        .add_rule(PathBeneath::new(
            PathFd::new("/").map_err(|e| prepare(&e))?,
            AccessFs::from_read(FILES),
        ))
        .map_err(|e| prepare(&e))?
        .add_rules(path_beneath_rules(
            WRITABLE_DEVICES,
            AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate,
        ))
        .map_err(|e| prepare(&e))?;
    if let (false, Some(port)) = (network, proxy_port) {
        created = created
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(|e| prepare(&e))?;
    }
    for dir in writable {
        let fd = PathFd::new(dir).map_err(|e| {
            SandboxError::Prepare(format!(
                "cannot open {} for the sandbox: {e}",
                dir.display()
            ))
        })?;
        created = created
            .add_rule(PathBeneath::new(fd, AccessFs::from_all(FILES)))
            .map_err(|e| prepare(&e))?;
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or_else(|| {
        SandboxError::Unenforceable(format!(
            "the kernel did not create a Landlock ruleset (ABI {ABI_FILES} or later is needed)"
        ))
    })
}

/// Confines the calling process (single-threaded: the inner layer, or a child between fork
/// and exec): no allocation, no locks.
pub(super) fn restrict_self(ruleset: &OwnedFd) -> io::Result<()> {
    // SAFETY: plain system calls on integers; async-signal-safe.
    unsafe {
        let on: libc::c_ulong = 1;
        let unused: libc::c_ulong = 0;
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, on, unused, unused, unused) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
