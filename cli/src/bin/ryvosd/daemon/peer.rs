//! Who may talk to the daemon: the user it runs as, from a process that is not one of the
//! sandboxed commands of a run.
//!
//! The socket's mode and the peer's uid keep other users out. They cannot keep out the model's
//! own commands, which run as the same user: Landlock does not confine connecting to a unix
//! socket before ABI 9, and a command that reached the daemon could approve its own requests or
//! start an unconfined run. Every sandboxed command runs with `no_new_privs`, which it cannot
//! drop, so a peer running with it is refused. (A trusted client started under
//! `NoNewPrivileges=yes` is refused too; it can run `ryvos run` in-process instead.)

use tokio::net::UnixStream;

/// Why a peer is not served, if it is not.
pub(super) fn refusal(stream: &UnixStream) -> Option<&'static str> {
    let Ok(cred) = stream.peer_cred() else {
        return Some("ryvosd could not tell who is connecting");
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    if cred.uid() != unsafe { libc::geteuid() } {
        return Some("ryvosd serves only the user it runs as");
    }
    match cred.pid().map(runs_with_no_new_privs) {
        Some(Ok(false)) => None,
        Some(Ok(true)) => Some(
            "ryvosd does not take requests from processes running with no_new_privs, as the \
             commands it sandboxes do; run ryvos from outside the sandbox",
        ),
        // Gone already, or unreadable: not served (fail closed).
        _ => Some("ryvosd could not check the connecting process"),
    }
}

/// Whether process `pid` runs with `no_new_privs` (the `NoNewPrivs:` line of its status).
fn runs_with_no_new_privs(pid: i32) -> std::io::Result<bool> {
    let mut file = std::fs::File::open(format!("/proc/{pid}/status"))?;
    // procfs reports a size of 0, so reading to the end would probe in 32-byte steps, a system
    // call each; the status is ~1.5 KB, and reads continue until its end.
    let mut status = String::with_capacity(4096);
    std::io::Read::read_to_string(&mut file, &mut status)?;
    Ok(status
        .lines()
        .find_map(|line| line.strip_prefix("NoNewPrivs:"))
        .is_some_and(|value| value.trim() == "1"))
}
