//! `[security]` and its `[security.sandbox]`: which calls need approval, and how the programs
//! a run starts are confined.

use serde::{Deserialize, Serialize};

/// `[security]`: the security gate's policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SecurityConfig {
    /// Tools whose calls need no approval (never a T4 call).
    pub auto_approve: Vec<String>,
    /// An unanswered approval is denied (as unanswered) after this many seconds.
    pub approval_timeout_secs: u64,
    /// Regular expressions a whole `bash` command may match to run without approval; a T4
    /// command runs only when a pattern names it this way.
    pub command_allowlist: Vec<String>,
    /// What each tier gets when neither list covers the call.
    pub policy: TierPolicy,
    /// The OS sandbox every command the model causes runs in.
    pub sandbox: SandboxConfig,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        Self {
            auto_approve: ["read", "glob", "grep", "memory_search"]
                .map(String::from)
                .to_vec(),
            approval_timeout_secs: 60,
            command_allowlist: Vec::new(),
            policy: TierPolicy::default(),
            sandbox: SandboxConfig::default(),
        }
    }
}

/// `[security.sandbox]`: how the processes started on the model's behalf are confined.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    pub mode: SandboxMode,
    /// `false` (the default): no TCP, UDP, raw sockets or DNS, and no service on loopback.
    /// `true` opens the whole network (dangerous).
    pub network: bool,
    /// Under `network = false`, names commands may reach through the daemon's proxy
    /// (`crates.io`, or `*.npmjs.org` for its subdomains).
    pub allowed_domains: Vec<String>,
    /// More directories a command may write in, under `workspace-write` (`~/` and `${VAR}`
    /// are expanded; each must exist).
    pub writable_paths: Vec<String>,
    /// `false` refuses new unix sockets (the user's D-Bus and systemd, docker, ssh-agent lead
    /// out of any sandbox).
    pub unix_sockets: bool,
    /// More paths no command may read (secrets are unreadable by default).
    pub deny_read: Vec<String>,
    /// Denied paths lifted knowingly (a path here uncovers a denied path it equals or holds).
    pub allow_read: Vec<String>,
    /// Environment variables a command may see though their names say they hold secrets.
    pub env_keep: Vec<String>,
    /// Processes a command may have alive at once, all its descendants together.
    pub max_processes: u64,
    /// Memory a command may use, all its descendants together, in MiB; 0: half the machine's.
    pub max_memory_mb: u64,
    /// When the daemon runs as root, the unprivileged user its commands run as (a name, a uid
    /// or `uid:gid`); `"root"` lends them root's power over files (dangerous).
    pub run_as: String,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            mode: SandboxMode::WorkspaceWrite,
            network: false,
            allowed_domains: Vec::new(),
            writable_paths: Vec::new(),
            unix_sockets: false,
            deny_read: Vec::new(),
            allow_read: Vec::new(),
            env_keep: Vec::new(),
            max_processes: 512,
            max_memory_mb: 0,
            run_as: "nobody".into(),
        }
    }
}

/// What a sandboxed command may write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Everything is readable; writes only in the workspace, the run's private temp dir and
    /// `writable_paths`.
    WorkspaceWrite,
    /// Everything is readable; writes only in the run's private temp dir.
    ReadOnly,
    /// No sandbox at all: commands can write anywhere the user can.
    Off,
}

impl SandboxMode {
    /// The name the config uses.
    pub fn name(self) -> &'static str {
        match self {
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::Off => "off",
        }
    }
}

/// `[security.policy]`: a decision per tier.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TierPolicy {
    pub t0: Decision,
    pub t1: Decision,
    pub t2: Decision,
    pub t3: Decision,
    pub t4: Decision,
}

impl Default for TierPolicy {
    fn default() -> Self {
        Self {
            t0: Decision::Allow,
            t1: Decision::Ask,
            t2: Decision::Ask,
            t3: Decision::Ask,
            t4: Decision::Deny,
        }
    }
}

/// What the policy does with a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// It runs.
    Allow,
    /// It waits for a person's approval (denied, as unanswered, after the timeout).
    Ask,
    /// It does not run; the model is told why.
    Deny,
}
