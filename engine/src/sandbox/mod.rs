//! The OS sandbox of every process started on the model's behalf: the `bash` tool, `command:`
//! criteria, and any tool that runs a program.
//!
//! On Linux it is Landlock. Under `workspace-write` (the default) the whole filesystem stays
//! readable and writes are allowed only under the run's workspace, a private temporary
//! directory made for the run (exported as `TMPDIR`) and `writable_paths`; `read-only` keeps
//! only the temporary directory; `network = false` also denies TCP connect and bind. The
//! ruleset is prepared in the parent and applied in the child between fork and exec (two plain
//! system calls, no allocation), so the daemon itself is never restricted, and `no_new_privs`
//! is set so a setuid program cannot lift the limits.
//!
//! Every command also runs in a session of its own (`setsid`), away from the terminal it could
//! otherwise type into, and, unless `unix_sockets = true`, cannot open a unix socket (see
//! [`seccomp`]). A workspace that holds the user's home, `$RYVOS_HOME` or `/` is refused under
//! `workspace-write`: commands could rewrite the shell's start-up files or Ryvos's own config.
//!
//! The security gate decides what to ask about; the sandbox is the guarantee. Where the kernel
//! cannot enforce the chosen mode, commands are refused with the reason and the knob, never run
//! unconfined.

#[cfg(target_os = "linux")]
mod landlock;
mod scratch;
#[cfg(target_os = "linux")]
mod seccomp;

use crate::config::{expand_env, SandboxConfig, SandboxMode};
use crate::workspace::Workspace;
use scratch::Scratch;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The Landlock ABI a mode needs: 3 for the file rights (truncation is a write), 4 for the
/// network rules.
const ABI_FILES: i32 = 3;
const ABI_NETWORK: i32 = 4;

/// The sandbox as configured and as the kernel allows it; shared by every run.
#[derive(Clone, Debug)]
pub struct Sandbox {
    policy: Arc<Policy>,
}

#[derive(Debug)]
struct Policy {
    mode: SandboxMode,
    network: bool,
    unix_sockets: bool,
    /// `writable_paths`, resolved.
    writable: Vec<PathBuf>,
    /// Directories a writable workspace must not hold: `$RYVOS_HOME`, the user's home, `/`.
    protected: Vec<PathBuf>,
    /// The kernel's Landlock ABI (0: none).
    abi: i32,
}

/// A `[security.sandbox]` setting that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SandboxConfigError {
    #[error("security.sandbox.writable_paths: '{path}' cannot be used ({cause}); create it or remove it from the list")]
    WritablePath { path: String, cause: String },
}

/// Why a command cannot be started confined.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SandboxError {
    #[error("the sandbox cannot be enforced on this machine: {0}. The command was refused rather than run unconfined; to run commands without a sandbox, knowingly set [security.sandbox] mode = \"off\" in config.toml")]
    Unenforceable(String),
    #[error("the workspace {workspace} holds {protected}: commands could rewrite what lives there (shell start-up files, Ryvos's config and store). Run with --workspace set to a project directory, or use [security.sandbox] mode = \"read-only\"")]
    Workspace {
        workspace: String,
        protected: String,
    },
    #[error("the run's private temporary directory could not be made: {0}")]
    Scratch(String),
    #[error("the sandbox could not be prepared: {0}")]
    Prepare(String),
}

impl Sandbox {
    /// The sandbox `config` asks for, on this machine's kernel; `ryvos_home` is never a
    /// writable workspace.
    pub fn new(config: &SandboxConfig, ryvos_home: &Path) -> Result<Self, SandboxConfigError> {
        Self::with_kernel_abi(config, ryvos_home, kernel_abi())
    }

    /// The sandbox `config` asks for, as if the kernel offered Landlock ABI `abi` (0: none).
    /// Only ever lowers what is enforced: a higher `abi` than the kernel's fails when a command
    /// is confined, never silently.
    pub fn with_kernel_abi(
        config: &SandboxConfig,
        ryvos_home: &Path,
        abi: i32,
    ) -> Result<Self, SandboxConfigError> {
        let user_home = std::env::var_os("HOME").map(PathBuf::from);
        let protected = [Some(ryvos_home.to_path_buf()), user_home, Some("/".into())]
            .into_iter()
            .flatten()
            .map(|p| p.canonicalize().unwrap_or(p))
            .collect();
        let writable = match config.mode {
            SandboxMode::WorkspaceWrite => config
                .writable_paths
                .iter()
                .map(|p| resolve_writable(p))
                .collect::<Result<Vec<_>, _>>()?,
            SandboxMode::ReadOnly | SandboxMode::Off => Vec::new(),
        };
        Ok(Self {
            policy: Arc::new(Policy {
                mode: config.mode,
                network: config.network,
                unix_sockets: config.unix_sockets,
                writable,
                protected,
                abi,
            }),
        })
    }

    /// The configured mode.
    pub fn mode(&self) -> SandboxMode {
        self.policy.mode
    }

    /// Why commands cannot be confined as configured, if they cannot.
    pub fn unenforceable(&self) -> Option<String> {
        let p = &self.policy;
        if p.mode == SandboxMode::Off {
            return None;
        }
        if !cfg!(target_os = "linux") {
            return Some("the sandbox uses Linux Landlock, and this is not Linux".into());
        }
        if p.abi < 1 {
            return Some(
                "the kernel has no Landlock (not built in, or not enabled at boot: add \
                 'landlock' to the lsm= kernel parameter)"
                    .into(),
            );
        }
        if p.abi < ABI_FILES {
            return Some(format!(
                "the kernel's Landlock ABI is {}; confining writes needs ABI {ABI_FILES} \
                 (Linux 6.2 or later)",
                p.abi
            ));
        }
        if !p.network && p.abi < ABI_NETWORK {
            return Some(format!(
                "the kernel's Landlock ABI is {}; network = false needs ABI {ABI_NETWORK} \
                 (Linux 6.7 or later)",
                p.abi
            ));
        }
        None
    }

    /// One line on the sandbox's state, for logs and `ryvos status`.
    pub fn describe(&self) -> String {
        let p = &self.policy;
        if p.mode == SandboxMode::Off {
            return "off: commands run unconfined (security.sandbox.mode = \"off\")".into();
        }
        if let Some(why) = self.unenforceable() {
            return format!(
                "{} cannot be enforced: {why}; commands are refused (set mode = \"off\" to run \
                 them unconfined)",
                p.mode.name()
            );
        }
        let network = if p.network {
            "network allowed"
        } else {
            "no network"
        };
        let mut line = format!("{}, {network} (Landlock ABI {})", p.mode.name(), p.abi);
        if !p.unix_sockets {
            line.push_str(", no unix sockets");
        }
        if !p.writable.is_empty() {
            let paths: Vec<_> = p.writable.iter().map(|w| w.display().to_string()).collect();
            line.push_str(&format!("; also writable: {}", paths.join(", ")));
        }
        line
    }

    /// The sandbox of one run in `workspace`.
    pub fn for_run(&self, workspace: &Workspace) -> RunSandbox {
        RunSandbox {
            sandbox: self.clone(),
            workspace: workspace.root().to_path_buf(),
            scratch: Arc::new(Scratch::default()),
        }
    }
}

/// The sandbox of one run: its workspace and its private temporary directory (made at the
/// first command, removed when the run is done with).
#[derive(Clone, Debug)]
pub struct RunSandbox {
    sandbox: Sandbox,
    workspace: PathBuf,
    scratch: Arc<Scratch>,
}

impl RunSandbox {
    /// A command running `program` in the workspace, confined as the mode says, with `TMPDIR`
    /// set to the run's private temporary directory. Refused when the kernel cannot enforce
    /// the mode.
    pub fn command(&self, program: &str) -> Result<tokio::process::Command, SandboxError> {
        let policy = &self.sandbox.policy;
        if let Some(why) = self.sandbox.unenforceable() {
            return Err(SandboxError::Unenforceable(why));
        }
        if policy.mode == SandboxMode::WorkspaceWrite {
            if let Some(protected) = policy
                .protected
                .iter()
                .find(|p| p.starts_with(&self.workspace))
            {
                return Err(SandboxError::Workspace {
                    workspace: self.workspace.display().to_string(),
                    protected: protected.display().to_string(),
                });
            }
        }
        let tmp = self.scratch.path().map_err(SandboxError::Scratch)?;
        let mut command = tokio::process::Command::new(program);
        command
            .current_dir(&self.workspace)
            .env("TMPDIR", &tmp)
            .env("TMP", &tmp)
            .env("TEMP", &tmp);
        // SAFETY: setsid is async-signal-safe. A session of its own also makes the command
        // the leader of its own process group, which is killed as a whole when it is stopped.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        if policy.mode == SandboxMode::Off {
            return Ok(command);
        }
        let mut writable = vec![tmp];
        if policy.mode == SandboxMode::WorkspaceWrite {
            writable.push(self.workspace.clone());
            writable.extend(policy.writable.iter().cloned());
        }
        #[cfg(target_os = "linux")]
        {
            let filter = match policy.unix_sockets {
                true => None,
                false => Some(seccomp::no_unix_sockets()?),
            };
            landlock::confine(&mut command, &writable, policy.network, filter)?;
        }
        Ok(command)
    }

    /// A note for the model when a confined command's output shows a refused write or
    /// connection, so it can adapt; `None` when there is nothing to explain.
    pub fn explain(&self, output: &str) -> Option<String> {
        let policy = &self.sandbox.policy;
        if policy.mode == SandboxMode::Off {
            return None;
        }
        let lower = output.to_lowercase();
        let shows = |signs: &[&str]| signs.iter().any(|sign| lower.contains(sign));
        let write_refused = shows(WRITE_REFUSED);
        let connect_refused = !policy.network && shows(CONNECT_REFUSED);
        if !write_refused && !connect_refused {
            return None;
        }
        if !write_refused {
            return Some(
                "[sandbox] This command runs in a sandbox without network: TCP connections \
                 are refused (network = false)."
                    .into(),
            );
        }
        let tmp = self
            .scratch
            .created()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "$TMPDIR".into());
        let mut note = match policy.mode {
            SandboxMode::ReadOnly => format!(
                "[sandbox] This command runs in a read-only sandbox: it may write only in \
                 $TMPDIR ({tmp}); any other write is refused (Permission denied)."
            ),
            _ => format!(
                "[sandbox] This command runs in a sandbox: it may write only inside the \
                 workspace ({}) and $TMPDIR ({tmp}); a write outside them is refused \
                 (Permission denied). Keep your work inside the workspace.",
                self.workspace.display()
            ),
        };
        if !policy.network {
            note.push_str(" Network connections are refused too (network = false).");
        }
        Some(note)
    }
}

/// How a refused write shows in a program's output (lowercased): errno names and messages.
const WRITE_REFUSED: &[&str] = &[
    "permission denied",
    "eacces",
    "operation not permitted",
    "eperm",
    "cross-device link",
    "exdev",
    "read-only file system",
];
/// How a refused connection shows, under `network = false`.
const CONNECT_REFUSED: &[&str] = &[
    "couldn't connect",
    "could not connect",
    "failed to connect",
    "unable to connect",
    "connection refused",
    "econnrefused",
    "network is unreachable",
];

/// `~/` and `${VAR}` expanded, then resolved: the directory must exist.
fn resolve_writable(raw: &str) -> Result<PathBuf, SandboxConfigError> {
    let error = |cause: String| SandboxConfigError::WritablePath {
        path: raw.to_owned(),
        cause,
    };
    let expanded =
        expand_env(raw, "security.sandbox.writable_paths").map_err(|e| error(e.to_string()))?;
    let path = match expanded.strip_prefix("~/") {
        Some(rest) => match std::env::var_os("HOME") {
            Some(home) => Path::new(&home).join(rest),
            None => return Err(error("HOME is not set, so ~ cannot be expanded".into())),
        },
        None => PathBuf::from(&expanded),
    };
    if !path.is_absolute() {
        return Err(error("the path must be absolute (or start with ~/)".into()));
    }
    path.canonicalize().map_err(|e| error(e.to_string()))
}

/// The Landlock ABI the kernel offers; 0 when it has none.
fn kernel_abi() -> i32 {
    #[cfg(target_os = "linux")]
    {
        landlock::kernel_abi()
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

#[cfg(test)]
mod tests;
