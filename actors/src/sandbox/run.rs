//! The sandbox of one run: the command line that starts a program confined, the rules the file
//! tools follow, and the notes that tell the model why something was refused.

use super::bubblewrap::{self, View};
use super::command::SandboxedCommand;
use super::egress::{AllowedDomains, EgressProxy, BRIDGE_PORT};
use super::file_rules::FileRules;
use super::git::GitGuard;
use super::identity::Lending;
use super::inner::InnerArgs;
use super::limits::{self, Cgroup, Mechanism};
use super::notes;
use super::planted::PlantedGit;
use super::scratch::Scratch;
use super::{secrets, Sandbox, SandboxError};
use crate::config::SandboxMode;
use crate::event::RunEvents;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The sandbox of one run: its workspace and its private temporary directory (made at the
/// first command, removed when the run is done with).
#[derive(Clone)]
pub struct RunSandbox {
    pub(super) sandbox: Sandbox,
    pub(super) workspace: PathBuf,
    pub(super) scratch: Arc<Scratch>,
    /// Numbers the commands' egress proxies' sockets.
    pub(super) proxies: Arc<AtomicU64>,
    /// Where the egress proxies' decisions are published.
    pub(super) events: Option<RunEvents>,
    /// What its commands may reach over the network.
    pub(super) reach: Reach,
}

/// What a run's commands may reach over the network: the policy's, or a hook's own.
#[derive(Clone, Debug)]
pub(super) struct Reach {
    pub(super) network: bool,
    pub(super) allowed: AllowedDomains,
}

impl std::fmt::Debug for RunSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunSandbox")
            .field("workspace", &self.workspace)
            .field("scratch", &self.scratch)
            .finish_non_exhaustive()
    }
}

/// The variables programs read their proxy from (curl, git, pip, cargo, npm, Go, Node).
const PROXY_VARIABLES: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "npm_config_proxy",
    "npm_config_https_proxy",
];

impl RunSandbox {
    /// The same sandbox, publishing its egress decisions on `events`.
    pub(crate) fn publishing(mut self, events: RunEvents) -> Self {
        self.events = Some(events);
        self
    }

    /// The directory its commands start in.
    pub(crate) fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The same sandbox for a hook's commands: no network but the names in `allowed` (a
    /// hook's own `allowed_domains`), whatever the run's commands may reach.
    pub(crate) fn for_hook(&self, allowed: AllowedDomains) -> Self {
        let mut sandbox = self.clone();
        sandbox.reach = Reach {
            network: false,
            allowed,
        };
        sandbox
    }

    /// A proxy for one command, when the policy needs one (the network closed, with names
    /// allowed).
    fn egress_proxy(&self, tmp: &Path) -> Result<Option<EgressProxy>, SandboxError> {
        let policy = &self.sandbox.policy;
        let reach = &self.reach;
        if reach.network || reach.allowed.is_empty() || policy.mode == SandboxMode::Off {
            return Ok(None);
        }
        let n = self.proxies.fetch_add(1, Ordering::Relaxed);
        let socket = tmp.join(format!(".ryvos-egress-{n}.sock"));
        EgressProxy::start(socket, reach.allowed.clone(), self.events.clone())
            .map(Some)
            .map_err(|e| SandboxError::Prepare(format!("the egress proxy: {e}")))
    }

    /// A command running `program` in the workspace, confined as the mode says, with `TMPDIR`
    /// set to the run's private temporary directory. Refused when the kernel cannot enforce
    /// the mode.
    pub fn command(&self, program: &str) -> Result<SandboxedCommand, SandboxError> {
        let policy = &self.sandbox.policy;
        if let Some(why) = self.sandbox.unenforceable() {
            return Err(SandboxError::Unenforceable(why));
        }
        if let Some(refused) = self.sandbox.workspace_refusal(&self.workspace) {
            return Err(refused);
        }
        let tmp = self.scratch.path().map_err(SandboxError::Scratch)?;
        let cgroup = match &policy.limits {
            Some(limits) => limits
                .cgroup()
                .map_err(|e| SandboxError::Prepare(format!("the command's cgroup: {e}")))?,
            None => None,
        };
        let proxy = self.egress_proxy(&tmp)?;
        // The repository as it is now (a command may have made one), looked at once.
        let git = self.git();
        let (mut command, lending) = match policy.mode {
            SandboxMode::Off => (tokio::process::Command::new(program), None),
            _ => self.confined(program, &tmp, proxy.as_ref(), &git)?,
        };
        command
            .current_dir(&self.workspace)
            .env("TMPDIR", &tmp)
            .env("TMP", &tmp)
            .env("TEMP", &tmp);
        let join = cgroup.as_ref().map(Cgroup::procs_files).unwrap_or_default();
        // SAFETY: setsid, the cgroup's open/write/close and the lending's mounts are system
        // calls on what was made before the fork. A session of its own also makes the command
        // the leader of its own process group, which is killed as a whole when it is stopped
        // (and with bubblewrap, its namespaces and everything in them die too). The cgroup is
        // joined while the child is still the daemon's user, before any lending drops it.
        unsafe {
            command.pre_exec(move || {
                limits::join(&join)?;
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                match &lending {
                    Some(lending) => lending.apply(),
                    None => Ok(()),
                }
            });
        }
        // A `commondir` file would send git to another directory's config and hooks: one that
        // appears during the command is taken away after it.
        let planted_commondir = git
            .git_dir
            .as_ref()
            .map(|dir| dir.join("commondir"))
            .filter(|file| !file.exists());
        // Hooks and programs the command writes into any other repository of the workspace
        // (writable_paths are caches, where nobody runs git: not walked after every command).
        let planted_git = (policy.mode == SandboxMode::WorkspaceWrite)
            .then(|| PlantedGit::starting_now(self.workspace.clone(), git.git_dir.clone()));
        // The workspace's hooks are a person's: a `.ryvos` that is there is held read-only,
        // one the command makes is taken away after it.
        let planted_hooks = Some(self.hooks_dir())
            .filter(|dir| policy.mode == SandboxMode::WorkspaceWrite && !dir.exists());
        Ok(SandboxedCommand {
            command,
            cgroup,
            proxy,
            planted_commondir,
            planted_git,
            planted_hooks,
        })
    }

    /// `program` inside both layers, with a built environment, and what the child must do
    /// first when the daemon lends its commands another user.
    fn confined(
        &self,
        program: &str,
        tmp: &Path,
        proxy: Option<&EgressProxy>,
        git: &GitGuard,
    ) -> Result<(tokio::process::Command, Option<Lending>), SandboxError> {
        let policy = &self.sandbox.policy;
        let missing = |why: &String| SandboxError::Unenforceable(why.clone());
        let bwrap = policy.machine.bubblewrap.as_ref().map_err(missing)?;
        let inner = policy.machine.inner.as_ref().map_err(missing)?;
        let mut writable = vec![tmp.to_path_buf()];
        if policy.mode == SandboxMode::WorkspaceWrite {
            writable.push(self.workspace.clone());
            writable.extend(policy.writable.iter().cloned());
        }
        let in_writable = |p: &PathBuf| writable.iter().any(|w| p.starts_with(w));
        let only_writable = |paths: &[PathBuf]| -> Vec<PathBuf> {
            paths.iter().filter(|p| in_writable(p)).cloned().collect()
        };
        let lending = self.lending(&writable, bwrap, inner)?;
        // A secret the lent user cannot reach needs no cover (and could not be given one).
        let hidden = self
            .sandbox
            .hidden()
            .into_iter()
            .filter(|h| lending.as_ref().is_none_or(|l| l.reaches(h)))
            .collect();
        let view = View {
            hidden,
            read_only: only_writable(&git.read_only)
                .into_iter()
                .chain(Some(self.hooks_dir()).filter(|dir| dir.is_dir()))
                .collect(),
            pinned: only_writable(git.git_dir.as_slice()),
            writable: writable.clone(),
            network: self.reach.network,
            cwd: self.workspace.clone(),
            disable_userns: bubblewrap::disables_userns(bwrap),
        };
        // Without a cgroup, the inner layer sets rlimits.
        let rlimits = policy
            .limits
            .as_ref()
            .filter(|l| l.mechanism == Mechanism::Rlimits);
        let inner_args = InnerArgs {
            writable,
            network: self.reach.network,
            unix_sockets: policy.unix_sockets,
            max_processes: rlimits.map(|l| l.max_processes),
            max_memory: rlimits.map(|l| l.max_memory),
            proxy: proxy.map(|p| p.socket().to_path_buf()),
            command: vec![program.into()],
        };
        let mut command = tokio::process::Command::new(bwrap);
        command
            .args(view.args())
            .arg(inner)
            .args(inner_args.to_args())
            .env_clear()
            .envs(secrets::command_env(
                std::env::vars_os(),
                &policy.site.config_vars,
                &policy.env_keep,
            ));
        if inner_args.proxy.is_some() {
            // The proxy resolves names: the command needs no DNS.
            let proxy = format!("http://127.0.0.1:{BRIDGE_PORT}");
            for name in PROXY_VARIABLES {
                command.env(name, &proxy);
            }
            command.env_remove("NO_PROXY").env_remove("no_proxy");
        }
        if lending.is_some() {
            // The daemon's home is not the lent user's: programs keep their caches in the
            // run's temporary directory instead.
            command.env("HOME", tmp);
        }
        Ok((command, lending))
    }

    /// What a command's child must do before it becomes bubblewrap, when the daemon lends
    /// commands another user: `writable` theirs, a read-only workspace readable, the programs
    /// and `allow_read` reachable.
    fn lending(
        &self,
        writable: &[PathBuf],
        bwrap: &Path,
        inner: &Path,
    ) -> Result<Option<Lending>, SandboxError> {
        let policy = &self.sandbox.policy;
        let Some(lender) = &policy.lender else {
            return Ok(None);
        };
        // The workspace is the user's to read under read-only; allow_read is reached as it
        // is, its files readable as their modes let any user (root's own stay closed).
        let readable = match policy.mode {
            SandboxMode::ReadOnly => vec![self.workspace.clone()],
            _ => Vec::new(),
        };
        let mut programs = vec![bwrap.to_path_buf(), inner.to_path_buf()];
        programs.extend(policy.allow_read.iter().cloned());
        lender
            .lend(writable, &readable, &programs, &self.workspace)
            .map(Some)
            .map_err(SandboxError::Unenforceable)
    }

    /// What the file tools (`read`, `write`, `edit`, `glob`, `grep`) may touch, as commands
    /// may: the secrets inside the workspace (a cover above the workspace does not hide the
    /// workspace, which is bound over it) and, under `workspace-write`, git's hooks and config.
    pub fn file_rules(&self) -> FileRules {
        if self.sandbox.policy.mode == SandboxMode::Off {
            return FileRules::default();
        }
        FileRules {
            hidden: self
                .sandbox
                .hidden()
                .into_iter()
                .filter(|h| h.starts_with(&self.workspace) && *h != self.workspace)
                .collect(),
            git: self.git(),
            read_only: self.sandbox.policy.mode == SandboxMode::ReadOnly,
            hooks_dir: Some(self.hooks_dir()),
        }
    }

    /// The workspace's `.ryvos`, where its own hooks live.
    fn hooks_dir(&self) -> PathBuf {
        let workspace = (self.workspace.canonicalize()).unwrap_or_else(|_| self.workspace.clone());
        workspace.join(".ryvos")
    }

    /// The repository around the workspace as it is now (a command may have made one), under
    /// `workspace-write`; nothing to guard otherwise (nothing there is writable).
    fn git(&self) -> GitGuard {
        match self.sandbox.policy.mode {
            SandboxMode::WorkspaceWrite => GitGuard::around(&self.workspace),
            SandboxMode::ReadOnly | SandboxMode::Off => GitGuard::default(),
        }
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
        let write_refused = shows(notes::WRITE_REFUSED);
        let connect_refused = !self.reach.network && shows(notes::CONNECT_REFUSED);
        if !write_refused && !connect_refused {
            return shows(notes::LIMIT_MET)
                .then(|| policy.limits.as_ref().map(notes::limit_note))
                .flatten();
        }
        if !write_refused {
            return Some(
                "[sandbox] This command runs in a sandbox without network: no connection \
                 leaves it, name lookups fail and services on this machine's loopback are \
                 out of reach (network = false)."
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
                 $TMPDIR ({tmp}); any other write is refused (Permission denied or Read-only \
                 file system)."
            ),
            _ => format!(
                "[sandbox] This command runs in a sandbox: it may write only inside the \
                 workspace ({}) and $TMPDIR ({tmp}); a write outside them is refused \
                 (Permission denied or Read-only file system). Keep your work inside the \
                 workspace.",
                self.workspace.display()
            ),
        };
        if self.git().git_dir.is_some() {
            note.push_str(
                " git's hooks and config are read-only (git add and git commit work; \
                 configure git with -c or environment variables instead).",
            );
        }
        if !self.reach.network {
            note.push_str(" Network connections are refused too (network = false).");
        }
        Some(note)
    }
}
