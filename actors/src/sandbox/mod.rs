//! The OS sandbox of every process started on the model's behalf: the `bash` tool, `command:`
//! criteria, and any tool that runs a program.
//!
//! Two layers, on Linux. Outside, namespaces made by bubblewrap (see [`bubblewrap`]): the
//! filesystem is read-only but for the run's workspace, a private temporary directory made for
//! the run (exported as `TMPDIR`) and `writable_paths`; secrets are covered (see [`secrets`]);
//! git's hooks and config stay read-only (see [`git`]); without network the command has a
//! network namespace of its own with nothing in it; it sees only its own processes, which all
//! die with it. Inside, `ryvos-sandbox` (see [`inner`]) adds Landlock and a system-call filter
//! before it becomes the command. The daemon itself is never restricted.
//!
//! The environment is built, not inherited: secrets are left out (see [`secrets`]). Every
//! command runs in a session of its own (`setsid`), away from the terminal it could otherwise
//! type into, and, unless `unix_sockets = true`, cannot open a unix socket (see [`seccomp`]).
//! A workspace that holds the user's home, `$RYVOS_HOME` or `/` is refused under
//! `workspace-write`: commands could rewrite the shell's start-up files or Ryvos's own config.
//!
//! The security gate decides what to ask about; the sandbox is the guarantee. Where the machine
//! cannot enforce the chosen mode (no bubblewrap, no user namespaces, no `ryvos-sandbox`),
//! commands are refused with the reason and the knob, never run unconfined.

#[cfg(target_os = "linux")]
mod bridge;
mod bubblewrap;
mod command;
mod egress;
mod file_rules;
pub(crate) mod git;
mod identity;
pub(crate) mod inner;
#[cfg(target_os = "linux")]
mod landlock;
mod limits;
mod machine;
mod notes;
pub(crate) mod pipes;
mod planted;
mod run;
mod scratch;
#[cfg(target_os = "linux")]
mod seccomp;
mod secrets;

pub(crate) use egress::{is_this_machine, AllowedDomains};
pub(crate) use file_rules::FileRules;
pub use machine::Machine;
pub(crate) use run::RunSandbox;
pub use secrets::Site;

use crate::config::{expand_env, SandboxConfig, SandboxMode};
use crate::workspace::Workspace;
use limits::Limits;
use scratch::Scratch;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The Landlock ABI the inner layer uses: 3 for the file rights (truncation is a write), 4 for
/// the network rules. Older kernels get the namespaces alone.
const ABI_FILES: i32 = 3;
const ABI_NETWORK: i32 = 4;

/// The sandbox as configured and as the machine allows it; shared by every run.
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
    /// Where secrets live (see [`secrets::hidden_paths`]).
    site: Site,
    deny_read: Vec<PathBuf>,
    allow_read: Vec<PathBuf>,
    env_keep: Vec<String>,
    /// Names reachable through the egress proxy under `network = false`.
    allowed: egress::AllowedDomains,
    /// Per-command limits; none when the sandbox is off.
    limits: Option<Limits>,
    /// The unprivileged user commands run as when the daemon is root (see [`identity`]).
    lender: Option<identity::Lender>,
    machine: Machine,
}

/// A `[security.sandbox]` setting that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SandboxConfigError {
    #[error("security.sandbox.{key}: '{path}' cannot be used ({cause}); create it or remove it from the list")]
    Path {
        key: &'static str,
        path: String,
        cause: String,
    },
    #[error("security.sandbox.allowed_domains: {0}")]
    AllowedDomains(String),
    #[error("security.sandbox.run_as: {0}")]
    RunAs(String),
}

/// Why a command cannot be started confined.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SandboxError {
    #[error("the sandbox cannot be enforced on this machine: {0}. The command was refused rather than run unconfined (`ryvos doctor` says what is missing); to run commands without a sandbox, knowingly set [security.sandbox] mode = \"off\" in config.toml")]
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
    /// The sandbox `config` asks for, on this machine, keeping what `site` holds secret.
    pub fn new(config: &SandboxConfig, site: Site) -> Result<Self, SandboxConfigError> {
        let machine = match config.mode {
            // Nothing to look for: commands run unconfined.
            SandboxMode::Off => Machine {
                bubblewrap: Err("not needed".into()),
                inner: Err("not needed".into()),
                landlock_abi: 0,
            },
            _ => Machine::detect(lender(config)?.map(|l| (l.uid, l.gid))),
        };
        Self::on_machine(config, site, machine)
    }

    /// The sandbox `config` asks for, as if the machine offered `machine`. Only ever lowers
    /// what is enforced: a piece that is not really there fails when a command is confined,
    /// never silently.
    pub fn on_machine(
        config: &SandboxConfig,
        site: Site,
        machine: Machine,
    ) -> Result<Self, SandboxConfigError> {
        let user_home = std::env::var_os("HOME").map(PathBuf::from);
        let protected = [Some(site.ryvos_home.clone()), user_home, Some("/".into())]
            .into_iter()
            .flatten()
            .map(|p| p.canonicalize().unwrap_or(p))
            .collect();
        let writable = match config.mode {
            SandboxMode::WorkspaceWrite => config
                .writable_paths
                .iter()
                .map(|p| resolve_path(p, "writable_paths", true))
                .collect::<Result<Vec<_>, _>>()?,
            SandboxMode::ReadOnly | SandboxMode::Off => Vec::new(),
        };
        let listed = |paths: &[String], key| {
            paths
                .iter()
                .map(|p| resolve_path(p, key, false))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Self {
            policy: Arc::new(Policy {
                mode: config.mode,
                network: config.network,
                unix_sockets: config.unix_sockets,
                writable,
                protected,
                site,
                deny_read: listed(&config.deny_read, "deny_read")?,
                allow_read: listed(&config.allow_read, "allow_read")?,
                env_keep: config.env_keep.clone(),
                allowed: egress::AllowedDomains::parse(&config.allowed_domains)
                    .map_err(SandboxConfigError::AllowedDomains)?,
                limits: (config.mode != SandboxMode::Off)
                    .then(|| Limits::detect(config.max_processes, config.max_memory_mb)),
                lender: lender(config)?,
                machine,
            }),
        })
    }

    /// The configured mode.
    pub fn mode(&self) -> SandboxMode {
        self.policy.mode
    }

    /// What every run is warned of: a sandbox that is off, or a network that is open.
    pub fn run_warning(&self) -> Option<String> {
        let p = &self.policy;
        if p.mode == SandboxMode::Off {
            return Some(
                "the sandbox is off ([security.sandbox] mode = \"off\"): the model's commands \
                 can write anywhere this user can"
                    .into(),
            );
        }
        p.network.then(|| {
            "the network is open to the model's commands ([security.sandbox] network = true): \
             they can reach any host, this machine's own services included, and send data out"
                .into()
        })
    }

    /// Where a command can change things outside its workspace (and its private temp dir),
    /// which no rewind of the workspace undoes; `None` where it cannot.
    pub fn reach_beyond_workspace(&self) -> Option<String> {
        let p = &self.policy;
        let mut reach = Vec::new();
        match p.mode {
            SandboxMode::Off => {
                reach.push("anywhere this user can write (the sandbox is off)".into())
            }
            SandboxMode::ReadOnly => {}
            SandboxMode::WorkspaceWrite if !p.writable.is_empty() => {
                let paths: Vec<_> = p.writable.iter().map(|w| w.display().to_string()).collect();
                reach.push(format!("writable_paths ({})", paths.join(", ")));
            }
            SandboxMode::WorkspaceWrite => {}
        }
        if p.network {
            reach.push("the network".to_owned());
        } else if !p.allowed.is_empty() {
            reach.push(format!(
                "allowed_domains ({})",
                p.allowed.names().join(", ")
            ));
        }
        (!reach.is_empty()).then(|| reach.join(" and "))
    }

    /// Why no command may run in `workspace`, if none may: a writable workspace that holds
    /// `$RYVOS_HOME`, the user's home or `/`. A run is refused for it before it starts.
    pub fn workspace_refusal(&self, workspace: &std::path::Path) -> Option<SandboxError> {
        if self.policy.mode != SandboxMode::WorkspaceWrite {
            return None;
        }
        let protected = (self.policy.protected.iter()).find(|p| p.starts_with(workspace))?;
        Some(SandboxError::Workspace {
            workspace: workspace.display().to_string(),
            protected: protected.display().to_string(),
        })
    }

    /// Why commands cannot be confined as configured, if they cannot.
    pub fn unenforceable(&self) -> Option<String> {
        let p = &self.policy;
        if p.mode == SandboxMode::Off {
            return None;
        }
        if !cfg!(target_os = "linux") {
            return Some("the sandbox uses Linux namespaces, and this is not Linux".into());
        }
        if let Err(why) = &p.machine.bubblewrap {
            return Some(why.clone());
        }
        if let Err(why) = &p.machine.inner {
            return Some(why.clone());
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
        let network = match (p.network, p.allowed.is_empty()) {
            (true, _) => "network allowed (network = true: dangerous)".to_owned(),
            (false, true) => "no network".to_owned(),
            (false, false) => format!(
                "no network but {} through the egress proxy",
                p.allowed.names().join(", ")
            ),
        };
        let inner = match p.machine.landlock_abi {
            abi if abi >= ABI_FILES => format!("Landlock ABI {abi} inside"),
            _ => "no Landlock on this kernel".to_owned(),
        };
        let mut line = format!(
            "{}, {network}, secrets hidden, git hooks and config read-only (bubblewrap \
             namespaces; {inner})",
            p.mode.name()
        );
        if !p.unix_sockets {
            line.push_str(", no unix sockets");
        }
        line.push_str(&format!("; {}", self.identity()));
        if let Some(limits) = &p.limits {
            line.push_str(&format!("; {}", limits.describe()));
        }
        if !p.writable.is_empty() {
            let paths: Vec<_> = p.writable.iter().map(|w| w.display().to_string()).collect();
            line.push_str(&format!("; also writable: {}", paths.join(", ")));
        }
        line
    }

    /// Who commands run as: the daemon's user, or the user lent to them when it is root.
    pub fn identity(&self) -> String {
        let p = &self.policy;
        match (&p.lender, p.mode) {
            (_, SandboxMode::Off) => "commands run as the daemon's user".into(),
            (Some(lender), _) => lender.describe(),
            // SAFETY: geteuid only reads the caller's id.
            (None, _) if unsafe { libc::geteuid() } == 0 => {
                "commands run as root (run_as = \"root\": they can read every root-only file)"
                    .into()
            }
            (None, _) => "commands run as the daemon's user".into(),
        }
    }

    /// The sandbox of one run in `workspace`.
    pub fn for_run(&self, workspace: &Workspace) -> RunSandbox {
        RunSandbox {
            sandbox: self.clone(),
            workspace: workspace.root().to_path_buf(),
            scratch: Arc::new(Scratch::default()),
            proxies: Arc::default(),
            events: None,
            reach: run::Reach {
                network: self.policy.network,
                allowed: self.policy.allowed.clone(),
            },
        }
    }

    /// The paths a command must not read, as they are now.
    fn hidden(&self) -> Vec<PathBuf> {
        let p = &self.policy;
        let home = std::env::var_os("HOME").map(PathBuf::from);
        secrets::hidden_paths(
            &p.site.ryvos_home,
            p.site.config_file.as_deref(),
            home.as_deref(),
            &p.deny_read,
            &p.allow_read,
        )
    }
}

/// The user a root daemon lends its commands, under a sandbox that is on.
fn lender(config: &SandboxConfig) -> Result<Option<identity::Lender>, SandboxConfigError> {
    if config.mode == SandboxMode::Off {
        return Ok(None);
    }
    // SAFETY: geteuid only reads the caller's id.
    identity::Lender::for_daemon(unsafe { libc::geteuid() }, &config.run_as)
        .map_err(SandboxConfigError::RunAs)
}

/// `~/` and `${VAR}` expanded, then resolved; with `must_exist`, the path must exist (a path
/// that does not is kept as written).
fn resolve_path(
    raw: &str,
    key: &'static str,
    must_exist: bool,
) -> Result<PathBuf, SandboxConfigError> {
    let error = |cause: String| SandboxConfigError::Path {
        key,
        path: raw.to_owned(),
        cause,
    };
    let expanded =
        expand_env(raw, &format!("security.sandbox.{key}")).map_err(|e| error(e.to_string()))?;
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
    match path.canonicalize() {
        Ok(real) => Ok(real),
        Err(e) if must_exist => Err(error(e.to_string())),
        Err(_) => Ok(path),
    }
}

#[cfg(test)]
mod tests;
