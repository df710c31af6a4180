//! A command ready to start in its sandbox, holding its cgroup and its egress proxy until it
//! is done.

use super::egress::EgressProxy;
use super::limits::Cgroup;
use super::planted::PlantedGit;

/// A command ready to start in its sandbox (use it as the [`tokio::process::Command`] it
/// derefs to); keep it until the command is done: its cgroup (and anything left in it) and its
/// egress proxy go when it is dropped.
#[derive(Debug)]
pub struct SandboxedCommand {
    pub(super) command: tokio::process::Command,
    pub(super) cgroup: Option<Cgroup>,
    pub(super) proxy: Option<EgressProxy>,
    /// The git directory's `commondir`, which did not exist when the command started.
    pub(super) planted_commondir: Option<std::path::PathBuf>,
    /// The search for git code the command plants elsewhere (in a repository it makes, say);
    /// taken when it is done.
    pub(super) planted_git: Option<PlantedGit>,
    /// The workspace's `.ryvos`, which did not exist when the command started.
    pub(super) planted_hooks: Option<std::path::PathBuf>,
}

impl SandboxedCommand {
    /// Undoes what the command planted for later, once it has ended, and says what the model
    /// should know about how it ended: a limit its cgroup counted, names its egress proxy
    /// refused, a git redirection taken away, git hooks and programs disabled.
    pub async fn finish(&mut self) -> Vec<String> {
        let mut notes: Vec<String> = [
            self.limit_met(),
            self.egress_refused(),
            self.commondir_removed(),
            self.hooks_removed(),
        ]
        .into_iter()
        .flatten()
        .collect();
        if let Some(planted) = self.planted_git.take() {
            // A walk of the workspace: off the async workers.
            match tokio::task::spawn_blocking(move || planted.disable()).await {
                Ok(disabled) => notes.extend(disabled),
                Err(e) => notes.push(format!(
                    "[sandbox] The search for git hooks this command may have planted failed \
                     ({e}): do not run git in repositories it made before looking at their \
                     hooks."
                )),
            }
        }
        notes
    }

    /// Removes a `commondir` the command made in the git directory (it would point git at a
    /// config and hooks of the command's choosing, run at the user's next git command).
    fn commondir_removed(&self) -> Option<String> {
        let file = self.planted_commondir.as_ref()?;
        if !file.exists() {
            return None;
        }
        if let Err(e) = std::fs::remove_file(file) {
            tracing::error!("a planted {} could not be removed: {e}", file.display());
            return Some(format!(
                "[sandbox] This command made {}, which redirects git's config and hooks; it \
                 could not be removed ({e}): do not run git here before removing it.",
                file.display()
            ));
        }
        Some(format!(
            "[sandbox] This command made {}, which would redirect git's config and hooks \
             elsewhere; it was removed. git's hooks and config stay read-only.",
            file.display()
        ))
    }

    /// Moves aside a `.ryvos` the command made in the workspace: hooks written there would run
    /// at the next run once a person trusted them, and a person may trust without reading.
    /// Moved, not removed: nothing is lost if it was not the command's.
    fn hooks_removed(&self) -> Option<String> {
        let dir = self.planted_hooks.as_ref()?;
        std::fs::symlink_metadata(dir).ok()?;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        let stamp = now.map(|d| d.as_millis()).unwrap_or_default();
        let aside = dir.with_file_name(format!(".ryvos-made-by-a-command-{stamp}"));
        if let Err(e) = std::fs::rename(dir, &aside) {
            tracing::error!("a planted {} could not be moved aside: {e}", dir.display());
            return Some(format!(
                "[sandbox] This command made {}, where the workspace's hooks live; it could \
                 not be moved aside ({e}).",
                dir.display()
            ));
        }
        Some(format!(
            "[sandbox] This command made {}, where the workspace's hooks live (only a person \
             writes there); it was moved to {}.",
            dir.display(),
            aside.display()
        ))
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

impl Drop for SandboxedCommand {
    /// A caller that did not [`finish`](SandboxedCommand::finish) still gets the git
    /// redirection taken away and git code planted elsewhere disabled.
    fn drop(&mut self) {
        if let Some(file) = self.planted_commondir.take().filter(|f| f.exists()) {
            if let Err(e) = std::fs::remove_file(&file) {
                tracing::error!("a planted {} could not be removed: {e}", file.display());
            }
        }
        if let Some(planted) = self.planted_git.take() {
            for note in planted.disable() {
                tracing::warn!("{note}");
            }
        }
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
