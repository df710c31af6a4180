//! What the file tools (`read`, `write`, `edit`, `glob`, `grep`) may not touch inside the
//! workspace, as commands may not: covered secrets, git's hooks and config, the workspace's
//! own hooks (`.ryvos`), and under `mode = "read-only"` anything at all to write.

use super::git::GitGuard;
use std::path::{Path, PathBuf};

/// What the file tools may not touch inside the workspace (see [`RunSandbox::file_rules`]).
#[derive(Clone, Debug, Default)]
pub struct FileRules {
    pub(super) hidden: Vec<PathBuf>,
    pub(super) git: GitGuard,
    /// `mode = "read-only"`: the file tools write nothing, as commands write only `$TMPDIR`.
    pub(super) read_only: bool,
    /// The workspace's `.ryvos`, where its hooks live: a person's to write, never the model's.
    pub(super) hooks_dir: Option<PathBuf>,
}

impl FileRules {
    /// Why `path` (resolved inside the workspace) may not be read, if it may not.
    pub fn refuses_read(&self, path: &Path) -> Option<String> {
        let secret = self.hidden.iter().find(|h| path.starts_with(h))?;
        Some(format!(
            "{} is kept from the model by the sandbox ({} is a secret: Ryvos's home, its \
             config file, a credential place or [security.sandbox] deny_read); lift it \
             knowingly with allow_read",
            path.display(),
            secret.display()
        ))
    }

    /// Why `path` (resolved inside the workspace) may not be written, if it may not.
    pub fn refuses_write(&self, path: &Path) -> Option<String> {
        if self.read_only {
            return Some(format!(
                "{} cannot be written: the sandbox is read-only ([security.sandbox] mode = \
                 \"read-only\"), for the file tools as for commands; say what you would change \
                 instead, or ask the user to run with mode = \"workspace-write\"",
                path.display()
            ));
        }
        if let Some(why) = self.refuses_read(path) {
            return Some(why);
        }
        if self
            .hooks_dir
            .as_ref()
            .is_some_and(|dir| path.starts_with(dir))
        {
            return Some(format!(
                "{} is where the workspace keeps its hooks, programs run at each step of a run: \
                 only a person writes there (and trusts what is written, with `ryvos hooks \
                 trust`)",
                path.display()
            ));
        }
        self.git.protects(path).then(|| {
            format!(
                "{} is one of git's hooks or its config, which stay read-only: code written \
                 there would run at the user's next git command, outside any sandbox. Configure \
                 git with -c or environment variables instead",
                path.display()
            )
        })
    }
}
