//! The sandbox's system-call filter: no new unix sockets (unless allowed), no tracing of other
//! processes, no io_uring, no typing into a terminal, and none of the calls that reach the
//! kernel's least-guarded corners or the user's secrets (keyrings, BPF, performance events,
//! userfaultfd, modules, mounts, namespaces), as container runtimes' default filters refuse
//! them.
//!
//! Landlock does not confine connecting to a unix socket before ABI 9, and unix sockets lead
//! out of any sandbox: the user's systemd and D-Bus (`systemd-run --user …` runs anything,
//! unconfined), `docker.sock`, tmux, ssh-agent, X11. So a confined command cannot create one
//! (`socket(AF_UNIX, …)` fails with `EACCES`); `socketpair`, which only joins a process to its
//! own children, stays allowed. `[security.sandbox] unix_sockets = true` lifts this.

use super::SandboxError;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// Calls no command the model runs needs: the user's keyrings (its secrets), the kernel's
/// programmable and debugging interfaces (BPF, performance events, userfaultfd: the usual
/// ways into kernel exploits), modules and kexec, and mounts and namespaces (a command has
/// its own already, made for it).
const KERNEL_CORNERS: &[i64] = &[
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_setns,
    libc::SYS_unshare,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_mount_setattr,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_syslog,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_lookup_dcookie,
];

/// The mode bits that make a program run as its owner or group (`S_ISUID`, `S_ISGID`).
const PRIVILEGE_BITS: [u64; 2] = [libc::S_ISUID as u64, libc::S_ISGID as u64];

/// Rules refusing a file mode with a set-user-id or set-group-id bit, given to `chmod` and its
/// kin or to a file created. Files a command makes may belong to someone else afterwards
/// (root's, for a daemon run as root that lends its commands a user): a set-id program left
/// there would run as them.
fn privilege_bits() -> Result<Vec<(i64, Vec<SeccompRule>)>, seccompiler::BackendError> {
    // The system call, the argument holding the mode, and the one holding open's flags.
    let mut calls: Vec<(i64, u8, Option<u8>)> = vec![
        (libc::SYS_fchmod, 1, None),
        (libc::SYS_fchmodat, 2, None),
        (FCHMODAT2, 2, None),
        (libc::SYS_openat, 3, Some(2)),
        (libc::SYS_mknodat, 2, None),
    ];
    // The older calls, which newer architectures have only as the *at ones above.
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        (libc::SYS_chmod, 1, None),
        (libc::SYS_creat, 1, None),
        (libc::SYS_open, 2, Some(1)),
        (libc::SYS_mknod, 1, None),
    ]);
    let mut rules = Vec::new();
    for (call, mode, flags) in calls {
        let mut of_call = Vec::new();
        for bit in PRIVILEGE_BITS {
            let mut conditions = vec![SeccompCondition::new(
                mode,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(bit),
                bit,
            )?];
            if let Some(flags) = flags {
                let create = libc::O_CREAT as u64;
                conditions.push(SeccompCondition::new(
                    flags,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(create),
                    create,
                )?);
            }
            of_call.push(SeccompRule::new(conditions)?);
        }
        rules.push((call, of_call));
    }
    Ok(rules)
}

/// `fchmodat2` (Linux 6.6), which the libc crate may not name yet.
const FCHMODAT2: i64 = 452;

/// The filter (allowing unix sockets with `unix_sockets`), compiled for this machine's architecture (a call made through another
/// architecture's entry point kills the process).
pub(super) fn filter(unix_sockets: bool) -> Result<BpfProgram, SandboxError> {
    let prepare =
        |e: &dyn std::fmt::Display| SandboxError::Prepare(format!("the system-call filter: {e}"));
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| prepare(&e))?;
    let unix_domain = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        libc::AF_UNIX as u64,
    )
    .map_err(|e| prepare(&e))?;
    // Tracing another process would let a command act through one outside its Landlock
    // domain (the egress bridge): refused outright, as are reads and writes of another
    // process's memory. io_uring makes sockets and connects without the socket call this
    // filter sees: refused too.
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = [
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ]
    .into_iter()
    .chain(KERNEL_CORNERS.iter().copied())
    .map(|call| (call, Vec::new()))
    .collect();
    // Typing into a terminal (TIOCSTI) or its console (TIOCLINUX) would run commands in the
    // user's shell, outside the sandbox.
    let typing: [u64; 2] = [libc::TIOCSTI, libc::TIOCLINUX];
    let typing = typing
        .into_iter()
        .map(|request| {
            let condition =
                SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, request)
                    .map_err(|e| prepare(&e))?;
            SeccompRule::new(vec![condition]).map_err(|e| prepare(&e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_ioctl, typing);
    for (call, rules_of_call) in privilege_bits().map_err(|e| prepare(&e))? {
        rules.insert(call, rules_of_call);
    }
    if !unix_sockets {
        rules.insert(
            libc::SYS_socket,
            vec![SeccompRule::new(vec![unix_domain]).map_err(|e| prepare(&e))?],
        );
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(|e| prepare(&e))?;
    filter.try_into().map_err(|e| prepare(&e))
}
