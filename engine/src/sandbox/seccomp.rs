//! The sandbox's system-call filter: no new unix sockets, no tracing of other processes.
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

/// The filter, compiled for this machine's architecture (a call made through another
/// architecture's entry point kills the process).
pub(super) fn no_unix_sockets() -> Result<BpfProgram, SandboxError> {
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
    // process's memory.
    let rules = BTreeMap::from([
        (
            libc::SYS_socket,
            vec![SeccompRule::new(vec![unix_domain]).map_err(|e| prepare(&e))?],
        ),
        (libc::SYS_ptrace, vec![]),
        (libc::SYS_process_vm_readv, vec![]),
        (libc::SYS_process_vm_writev, vec![]),
    ]);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(|e| prepare(&e))?;
    filter.try_into().map_err(|e| prepare(&e))
}
