//! What a confined command must not see: the files that hold secrets, and the environment
//! variables that do.
//!
//! Hidden by default: the daemon's home (`$RYVOS_HOME`: config, store, socket, logs), the
//! config file wherever it is, and the places under `$HOME` where tools keep credentials;
//! `deny_read` adds paths and `allow_read` lifts one knowingly. The environment is built, not
//! inherited: a variable the config names in a `${VAR}`, or whose name says it holds a secret,
//! is left out unless `env_keep` names it.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Where tools keep credentials, relative to `$HOME`.
const CREDENTIAL_PLACES: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".config/gcloud",
    ".azure",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".config/gh",
];

/// Where Ryvos keeps what a command must not read.
#[derive(Clone, Debug, Default)]
pub struct Site {
    /// `$RYVOS_HOME`.
    pub ryvos_home: PathBuf,
    /// The config file the daemon read, if any.
    pub config_file: Option<PathBuf>,
    /// The environment variables the config refers to (`${VAR}`): kept from commands.
    pub config_vars: BTreeSet<String>,
}

impl Site {
    /// The site of `ryvos_home` with no config file.
    pub fn home(ryvos_home: &Path) -> Self {
        Self {
            ryvos_home: ryvos_home.to_path_buf(),
            ..Self::default()
        }
    }

    /// Adds the variables `config` (any serializable settings) refers to as `${VAR}`.
    pub fn with_vars_of(mut self, config: &impl serde::Serialize) -> Self {
        let text = serde_json::to_string(config).unwrap_or_default();
        self.config_vars.extend(referenced_vars(&text));
        self
    }
}

/// Parts of a variable's name (uppercased) that say it holds a secret.
const SECRET_NAME_PARTS: &[&str] = &["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"];

/// Variables that lead to an agent holding keys outside the sandbox.
const AGENT_SOCKETS: &[&str] = &["SSH_AUTH_SOCK", "GPG_AGENT_INFO"];

/// The paths a confined command must not read, as they exist now (resolved, deduplicated):
/// `ryvos_home`, `config_file`, the credential places under `home`, and `deny_read`, minus
/// `allow_read` (an allowed path lifts a denied one it equals or holds).
pub(super) fn hidden_paths(
    ryvos_home: &Path,
    config_file: Option<&Path>,
    home: Option<&Path>,
    deny_read: &[PathBuf],
    allow_read: &[PathBuf],
) -> Vec<PathBuf> {
    let mut denied: Vec<PathBuf> = vec![ryvos_home.to_path_buf()];
    denied.extend(config_file.map(Path::to_path_buf));
    if let Some(home) = home {
        denied.extend(CREDENTIAL_PLACES.iter().map(|place| home.join(place)));
    }
    denied.extend(deny_read.iter().cloned());
    let allowed: Vec<PathBuf> = allow_read.iter().map(|p| resolved(p)).collect();
    let hidden: BTreeSet<PathBuf> = denied
        .iter()
        // A path that does not exist holds nothing to hide (and cannot be written, so it
        // cannot come to exist during a command outside the writable places).
        .filter_map(|p| p.canonicalize().ok())
        .filter(|p| !allowed.iter().any(|a| p.starts_with(a)))
        .collect();
    hidden.into_iter().collect()
}

fn resolved(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

/// The environment of a confined command: the daemon's own, without secrets. `named` are the
/// variables the config refers to (`${VAR}`); `keep` are passed whatever their names say.
pub(super) fn command_env(
    inherited: impl IntoIterator<Item = (OsString, OsString)>,
    named: &BTreeSet<String>,
    keep: &[String],
) -> Vec<(OsString, OsString)> {
    inherited
        .into_iter()
        .filter(|(name, _)| {
            let name = name.to_string_lossy();
            keep.iter().any(|k| *k == name) || !is_secret(&name, named)
        })
        .collect()
}

/// Whether a variable called `name` is kept from confined commands.
fn is_secret(name: &str, named: &BTreeSet<String>) -> bool {
    let upper = name.to_uppercase();
    named.contains(name)
        || SECRET_NAME_PARTS.iter().any(|part| upper.contains(part))
        || AGENT_SOCKETS.contains(&name)
}

/// The variables `text` (a config, serialized) refers to as `${VAR}`.
pub(super) fn referenced_vars(text: &str) -> BTreeSet<String> {
    let mut vars = BTreeSet::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        rest = &rest[start + 2..];
        let Some(end) = rest.find('}') else { break };
        let name = &rest[..end];
        if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            vars.insert(name.to_owned());
        }
        rest = &rest[end..];
    }
    vars
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_home_config_and_deny_read_are_hidden_unless_allowed() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().canonicalize().unwrap();
        for dir in [".ssh", ".aws", ".config/gh", ".ryvos", "project"] {
            std::fs::create_dir_all(h.join(dir)).unwrap();
        }
        std::fs::write(h.join(".netrc"), "machine x password y").unwrap();
        std::fs::write(h.join("project/.env"), "A=1").unwrap();
        let config = h.join("elsewhere.toml");
        std::fs::write(&config, "").unwrap();
        let hidden = hidden_paths(
            &h.join(".ryvos"),
            Some(&config),
            Some(&h),
            &[h.join("project/.env"), h.join("missing")],
            &[h.join(".aws")],
        );
        let expected: Vec<PathBuf> = [
            ".config/gh",
            ".netrc",
            ".ryvos",
            ".ssh",
            "elsewhere.toml",
            "project/.env",
        ]
        .iter()
        .map(|p| h.join(p))
        .collect();
        assert_eq!(hidden, expected);
    }

    #[test]
    fn secrets_are_left_out_of_the_environment_unless_kept() {
        let vars = |pairs: &[(&str, &str)]| -> Vec<(OsString, OsString)> {
            pairs
                .iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                .collect()
        };
        let inherited = vars(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("OPENAI_API_KEY", "sk-1"),
            ("GITHUB_TOKEN", "ghp"),
            ("db_password", "p"),
            ("MY_MODEL_ENDPOINT", "https://x"),
            ("SSH_AUTH_SOCK", "/run/agent"),
            ("NPM_TOKEN", "n"),
        ]);
        let named = referenced_vars("base_url = \"${MY_MODEL_ENDPOINT}\"\nx = \"${ bad}\"");
        assert_eq!(named, BTreeSet::from(["MY_MODEL_ENDPOINT".to_owned()]));
        let env = command_env(inherited, &named, &["NPM_TOKEN".into()]);
        assert_eq!(
            env,
            vars(&[
                ("PATH", "/usr/bin"),
                ("HOME", "/home/u"),
                ("NPM_TOKEN", "n")
            ])
        );
    }
}
