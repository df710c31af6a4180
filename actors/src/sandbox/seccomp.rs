//! The sandbox's system-call filter: no new unix sockets (unless allowed), no tracing of other
//! processes, no io_uring.
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
    .map(|call| (call, Vec::new()))
    .collect();
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
