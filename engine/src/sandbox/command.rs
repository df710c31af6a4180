//! A command ready to start in its sandbox, holding its cgroup until it is done.

use super::limits::Cgroup;

/// A command ready to start in its sandbox (use it as the [`tokio::process::Command`] it
/// derefs to); keep it until the command is done: its cgroup, and anything left in it, go
/// when it is dropped.
#[derive(Debug)]
pub struct SandboxedCommand {
    pub(super) command: tokio::process::Command,
    pub(super) cgroup: Option<Cgroup>,
}

impl SandboxedCommand {
    /// A note for the model when the command met a limit its cgroup counted.
    pub fn limit_met(&self) -> Option<String> {
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
