//! `[rewind]`: a snapshot of the workspace at every turn, so that `rewind` and `fork` bring its
//! files back with the conversation.

use serde::{Deserialize, Serialize};

/// `[rewind]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RewindConfig {
    /// Whether every turn snapshots the workspace (off: `rewind` and `fork` are refused).
    pub enabled: bool,
    /// A file larger than this (in MiB) is not kept: a turn that holds one cannot be rewound
    /// to, and says why.
    pub max_file_mb: u64,
    /// Paths left out of snapshots, as gitignore-like globs: one without a `/` matches a
    /// name at any depth (`target`), one with a `/` a path from the workspace (`docs/*.pdf`).
    /// A rewind leaves them as they are. `.git/objects` is always left out: a repository's
    /// objects are never rewritten, so its refs, `HEAD` and index are enough to go back.
    pub exclude: Vec<String>,
}

impl Default for RewindConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_file_mb: 50,
            // Build output and installed packages: large, many, and made again by a build.
            exclude: ["target", "node_modules", ".venv", "__pycache__"]
                .map(String::from)
                .to_vec(),
        }
    }
}
