//! A command ready to start in its sandbox, holding its cgroup and its egress proxy until it
//! is done.

use super::egress::EgressProxy;
use super::limits::Cgroup;

/// A command ready to start in its sandbox (use it as the [`tokio::process::Command`] it
/// derefs to); keep it until the command is done: its cgroup (and anything left in it) and its
/// egress proxy go when it is dropped.
#[derive(Debug)]
pub struct SandboxedCommand {
    pub(super) command: tokio::process::Command,
    pub(super) cgroup: Option<Cgroup>,
    pub(super) proxy: Option<EgressProxy>,
}

impl SandboxedCommand {
    /// What the model should know about how the command ended: a limit its cgroup counted,
    /// names its egress proxy refused.
    pub fn notes(&self) -> Vec<String> {
        [self.limit_met(), self.egress_refused()]
            .into_iter()
            .flatten()
            .collect()
    }

    /// A note naming the names the command was refused, if any.
    fn egress_refused(&self) -> Option<String> {
        let proxy = self.proxy.as_ref()?;
        let refused = proxy.refused();
        if refused.is_empty() {
            return None;
        }
        Some(format!(
            "[sandbox] Egress to {} was refused: commands reach only {} (through the proxy in \
             HTTPS_PROXY), set by [security.sandbox] allowed_domains.",
            refused.join(", "),
            proxy.allowed().join(", ")
        ))
    }

    /// A note for the model when the command met a limit its cgroup counted.
    fn limit_met(&self) -> Option<String> {
        let knob = self.cgroup.as_ref()?.limit_met()?;
        Some(format!(
            "[sandbox] The command met its limit ([security.sandbox] {knob}): {}",
            match knob {
                "max_processes" => "a fork past it failed.",
                _ => "a process past it was killed.",
            }
        ))
    }
}

impl std::ops::Deref for SandboxedCommand {
    type Target = tokio::process::Command;
    fn deref(&self) -> &Self::Target {
        &self.command
    }
}

impl std::ops::DerefMut for SandboxedCommand {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.command
    }
}
