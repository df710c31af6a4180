//! A workspace's own hooks, `.ryvos/hooks.toml`: they run only once a person trusted the file
//! as it is. A trust is the file's BLAKE3 hash kept in the store (`hooks:FILE#HASH`), outside
//! the workspace, so a file that changes (a pull request checked out, a model's command) is
//! untrusted again until a person trusts it again. Until then its hooks run 0 times, and every
//! run says so.

use super::Hook;
use crate::config::{ProjectHooks, PROJECT_HOOKS_FILE};
use crate::store::{now_ms, Store};
use ryvos_protocol::records::{Credential, CredentialKind};
use ryvos_protocol::socket::{ListedHook, ProjectHooksFile};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A hooks file larger than this is not read.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// A workspace's hooks file, read.
pub(crate) struct ProjectFile {
    pub path: PathBuf,
    pub hash: String,
    /// Its hooks, or why it cannot be used.
    pub hooks: Result<Vec<Arc<Hook>>, String>,
}

/// Whether a person trusted a hooks file as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trust {
    Trusted,
    Untrusted,
    /// Trusted before, as other content.
    Changed,
}

/// The hooks file of `workspace`, if it has one; an error when it is there but cannot be
/// read (a symlink is never followed: it could name any file).
pub(crate) fn read(workspace: &Path) -> Result<Option<ProjectFile>, String> {
    let workspace = workspace
        .canonicalize()
        .map_err(|e| format!("the workspace {}: {e}", workspace.display()))?;
    let path = workspace.join(PROJECT_HOOKS_FILE);
    let Some(bytes) = read_plain(&path)? else {
        return Ok(None);
    };
    let hash = blake3::hash(&bytes).to_hex().to_string();
    let origin = path.display().to_string();
    let hooks = std::str::from_utf8(&bytes)
        .map_err(|_| "it is not UTF-8 text".to_owned())
        .and_then(ProjectHooks::parse)
        .and_then(|file| super::compile(&file.hooks, &origin));
    Ok(Some(ProjectFile { path, hash, hooks }))
}

/// The file at `path`, read through no symbolic link (neither it nor its directory), at most
/// [`MAX_FILE_BYTES`]; `None` when there is none.
fn read_plain(path: &Path) -> Result<Option<Vec<u8>>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let shown = path.display();
    let dir = path.parent().unwrap_or(path);
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
        Ok(meta) if !meta.is_dir() => return Err(format!("{} is not a directory", dir.display())),
        Ok(_) => {}
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file = match file {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(format!(
                "{shown} is a symbolic link: hooks are read from a plain file only"
            ))
        }
        Err(e) => return Err(format!("{shown}: {e}")),
        Ok(file) => file,
    };
    // Looked at as opened: what is read is what was checked.
    let meta = file.metadata().map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown} is not a plain file"));
    }
    let mut bytes = Vec::new();
    (file.take(MAX_FILE_BYTES + 1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{shown}: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("{shown} is larger than 1 MiB"));
    }
    Ok(Some(bytes))
}

impl ProjectFile {
    /// Where its trusts are kept: `hooks:FILE#`.
    fn trust_prefix(&self) -> String {
        format!("hooks:{}#", self.path.display())
    }

    /// Whether a person trusted it as it is now.
    pub(crate) async fn trust(&self, store: &Store) -> Result<Trust, crate::store::StoreError> {
        let prefix = self.trust_prefix();
        let trusts = store.credentials(&prefix).await?;
        let this = format!("{prefix}{}", self.hash);
        Ok(match trusts.iter().any(|t| t.id == this) {
            true => Trust::Trusted,
            false if trusts.is_empty() => Trust::Untrusted,
            false => Trust::Changed,
        })
    }

    /// Trusts it as it is now, in place of any trust of its other contents.
    pub(crate) async fn make_trusted(&self, store: &Store) -> Result<(), String> {
        if let Err(why) = &self.hooks {
            return Err(format!(
                "{} cannot be trusted: {why}. Correct it, then trust it",
                self.path.display()
            ));
        }
        let prefix = self.trust_prefix();
        let failed = |e: crate::store::StoreError| format!("the trust could not be stored: {e}");
        for before in store.credentials(&prefix).await.map_err(failed)? {
            store.remove_credential(&before.id).await.map_err(failed)?;
        }
        let trust = Credential {
            id: format!("{prefix}{}", self.hash),
            kind: CredentialKind::TrustedHooks {
                file: self.path.display().to_string(),
                hash: self.hash.clone(),
            },
            created_ms: now_ms(),
            expires_ms: None,
        };
        store.add_credential(&trust).await.map_err(failed)?;
        Ok(())
    }

    /// How it is listed, in `trust`.
    pub(crate) fn listed(&self, trust: Trust) -> ProjectHooksFile {
        let (state, error) = match (&self.hooks, trust) {
            (Err(why), _) => ("invalid", Some(why.clone())),
            (Ok(_), Trust::Trusted) => ("trusted", None),
            (Ok(_), Trust::Untrusted) => ("untrusted", None),
            (Ok(_), Trust::Changed) => ("changed", None),
        };
        ProjectHooksFile {
            file: self.path.display().to_string(),
            hash: self.hash.clone(),
            state: state.into(),
            error,
        }
    }
}

/// The hooks of `workspace`'s file that a run there gets (none unless trusted), and what the
/// run is to be warned of.
pub(crate) async fn for_run(workspace: &Path, store: &Store) -> (Vec<Arc<Hook>>, Option<String>) {
    let file = match read(workspace) {
        Ok(Some(file)) => file,
        Ok(None) => return (Vec::new(), None),
        Err(why) => {
            return (
                Vec::new(),
                Some(format!(
                    "the workspace's hooks cannot be read ({why}): none of them run"
                )),
            )
        }
    };
    let hooks = match &file.hooks {
        Ok(hooks) => hooks,
        Err(why) => {
            let warning = format!(
                "{} cannot be used ({why}): none of its hooks run",
                file.path.display()
            );
            return (Vec::new(), Some(warning));
        }
    };
    let trust_again = format!(
        "read it, then `ryvos hooks trust --workspace {}` lets them run",
        workspace.display()
    );
    let warning = match file.trust(store).await {
        Ok(Trust::Trusted) => return (hooks.clone(), None),
        Ok(Trust::Untrusted) => format!(
            "{} is not trusted: its {} hook(s) do not run; {trust_again}",
            file.path.display(),
            hooks.len()
        ),
        Ok(Trust::Changed) => format!(
            "{} changed since it was trusted: its {} hook(s) do not run; {trust_again}",
            file.path.display(),
            hooks.len()
        ),
        Err(e) => format!(
            "whether {} is trusted could not be read ({e}): its hooks do not run",
            file.path.display()
        ),
    };
    (Vec::new(), Some(warning))
}

/// How `hooks` are listed, `runs` or not.
pub(crate) fn listed(hooks: &[Arc<Hook>], runs: bool) -> Vec<ListedHook> {
    hooks
        .iter()
        .map(|hook| ListedHook {
            event: hook.event,
            matcher: hook.matcher_text.clone(),
            hook: hook.label.clone(),
            timeout_secs: hook.timeout().as_secs(),
            runs,
        })
        .collect()
}
