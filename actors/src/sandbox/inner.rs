//! The inner layer: `ryvos-sandbox`, run by bubblewrap inside the namespaces, confines itself
//! with Landlock (writes only in the writable places; without network, no TCP connect or bind)
//! and the system-call filter (see [`super::seccomp`]), then becomes the command.
//!
//! Landlock forbids the mounts bubblewrap makes, so it cannot be applied before bubblewrap
//! runs; this small program applies it after. It is a second wall behind the mount namespace:
//! a mistake in one layer is not an escape.
//!
//! ```text
//! ryvos-sandbox [--write DIR]... [--network] [--unix-sockets] [--max-processes N]
//!               [--max-memory BYTES] [--proxy SOCKET] -- PROGRAM [ARG]...
//! ```

use std::ffi::OsString;
use std::path::PathBuf;

/// What the inner layer is asked to enforce.
#[derive(Debug, Default, PartialEq)]
pub(super) struct InnerArgs {
    pub writable: Vec<PathBuf>,
    pub network: bool,
    pub unix_sockets: bool,
    /// `RLIMIT_NPROC`, where no cgroup holds the command (counted in its own user namespace).
    pub max_processes: Option<u64>,
    /// `RLIMIT_AS` in bytes, where no cgroup holds the command (per process).
    pub max_memory: Option<u64>,
    /// The egress proxy's socket, bridged to from `127.0.0.1:3128` (see [`super::bridge`]).
    pub proxy: Option<PathBuf>,
    pub command: Vec<OsString>,
}

impl InnerArgs {
    /// The arguments that say this.
    pub(super) fn to_args(&self) -> Vec<OsString> {
        let mut args = Vec::new();
        for dir in &self.writable {
            args.push("--write".into());
            args.push(dir.into());
        }
        if self.network {
            args.push("--network".into());
        }
        if self.unix_sockets {
            args.push("--unix-sockets".into());
        }
        if let Some(n) = self.max_processes {
            args.push("--max-processes".into());
            args.push(n.to_string().into());
        }
        if let Some(bytes) = self.max_memory {
            args.push("--max-memory".into());
            args.push(bytes.to_string().into());
        }
        if let Some(socket) = &self.proxy {
            args.push("--proxy".into());
            args.push(socket.into());
        }
        args.push("--".into());
        args.extend(self.command.iter().cloned());
        args
    }

    /// Reads `args` (without the program's own name).
    fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Self, String> {
        let mut parsed = Self::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.to_str() {
                Some("--write") => parsed
                    .writable
                    .push(args.next().ok_or("--write needs a directory")?.into()),
                Some("--network") => parsed.network = true,
                Some("--unix-sockets") => parsed.unix_sockets = true,
                Some("--max-processes") => parsed.max_processes = Some(number(args.next())?),
                Some("--max-memory") => parsed.max_memory = Some(number(args.next())?),
                Some("--proxy") => {
                    parsed.proxy = Some(args.next().ok_or("--proxy needs a socket")?.into())
                }
                Some("--") => {
                    parsed.command = args.collect();
                    break;
                }
                _ => return Err(format!("unknown argument {arg:?}")),
            }
        }
        if parsed.command.is_empty() {
            return Err("no command to run after --".into());
        }
        Ok(parsed)
    }
}

fn number(arg: Option<OsString>) -> Result<u64, String> {
    let arg = arg.ok_or("a limit needs a number")?;
    arg.to_str()
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| format!("{arg:?} is not a number"))
}

/// The program's body: confines itself and becomes the command; returns only on failure, with
/// the exit status to leave with (126, as a shell does for a command it cannot run).
pub fn main(args: impl IntoIterator<Item = OsString>) -> i32 {
    let fail = |why: String| {
        eprintln!("ryvos-sandbox: {why}; the command was not run");
        126
    };
    let args = match InnerArgs::parse(args) {
        Ok(args) => args,
        Err(why) => return fail(why),
    };
    #[cfg(target_os = "linux")]
    if let Some(socket) = &args.proxy {
        if let Err(why) = super::bridge::serve_beside_command(socket.clone()) {
            return fail(why);
        }
    }
    if let Err(why) = confine(&args) {
        return fail(why);
    }
    let error = exec(&args.command);
    fail(format!("cannot run {:?}: {error}", args.command[0]))
}

#[cfg(target_os = "linux")]
fn confine(args: &InnerArgs) -> Result<(), String> {
    // Set inside the command's own user namespace: the processes counted are its own.
    if let Some(n) = args.max_processes {
        set_rlimit(libc::RLIMIT_NPROC, n).map_err(|e| format!("max_processes: {e}"))?;
    }
    if let Some(bytes) = args.max_memory {
        set_rlimit(libc::RLIMIT_AS, bytes).map_err(|e| format!("max_memory_mb: {e}"))?;
    }
    // Landlock where the kernel has it: the namespaces are the guarantee, this the second wall.
    let abi = super::landlock::kernel_abi();
    if abi >= super::ABI_FILES {
        // Without network the namespace has none to offer; Landlock denies TCP too where it can.
        let network = args.network || abi < super::ABI_NETWORK;
        let proxy_port = args.proxy.as_ref().map(|_| super::egress::BRIDGE_PORT);
        let ruleset = super::landlock::ruleset(&args.writable, network, proxy_port)
            .map_err(|e| e.to_string())?;
        super::landlock::restrict_self(&ruleset).map_err(|e| format!("Landlock: {e}"))?;
    } else {
        set_no_new_privs()?;
    }
    {
        let filter = super::seccomp::filter(args.unix_sockets).map_err(|e| e.to_string())?;
        seccompiler::apply_filter(&filter).map_err(|e| format!("the system-call filter: {e}"))?;
    }
    Ok(())
}

#[cfg(target_os = "linux")]
fn set_rlimit(resource: libc::__rlimit_resource_t, value: u64) -> std::io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: a plain system call with a value on the stack.
    match unsafe { libc::setrlimit(resource, &limit) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

#[cfg(target_os = "linux")]
fn set_no_new_privs() -> Result<(), String> {
    // SAFETY: a plain system call on integers.
    let set = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    match set {
        0 => Ok(()),
        _ => Err(format!("no_new_privs: {}", std::io::Error::last_os_error())),
    }
}

#[cfg(not(target_os = "linux"))]
fn confine(_: &InnerArgs) -> Result<(), String> {
    Err("the sandbox needs Linux".into())
}

fn exec(command: &[OsString]) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    std::process::Command::new(&command[0])
        .args(&command[1..])
        .exec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_read_back_as_written() {
        let args = InnerArgs {
            writable: vec!["/ws".into(), "/tmp/run".into()],
            network: false,
            unix_sockets: true,
            max_processes: Some(512),
            max_memory: None,
            proxy: Some("/tmp/run/egress.sock".into()),
            command: vec!["bash".into(), "-c".into(), "--write".into()],
        };
        assert_eq!(InnerArgs::parse(args.to_args()).unwrap(), args);
        assert!(InnerArgs::parse(vec!["--write".into()]).is_err());
        assert!(InnerArgs::parse(vec!["--".into()]).is_err());
        assert!(InnerArgs::parse(vec!["--open-everything".into()]).is_err());
    }
}
