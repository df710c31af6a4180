//! The runtime's configuration, as a host application or `config.toml` gives it.

use ryvos_actors::config::{AgentConfig, ModelConfig, SupervisionConfig};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Everything a [`crate::Runtime`] is started with. Every section has the public defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where Ryvos keeps its database, logs and socket (`$RYVOS_HOME`, default `~/.ryvos`).
    #[serde(skip)]
    pub home: PathBuf,
    pub model: ModelConfig,
    pub agent: AgentConfig,
    pub supervision: SupervisionConfig,
    pub daemon: DaemonConfig,
}

/// `[daemon]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DaemonConfig {
    /// Runs in flight past this are answered "busy", never queued without bound.
    pub max_in_flight_runs: usize,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        Self {
            max_in_flight_runs: 64,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            home: default_home(),
            model: ModelConfig::default(),
            agent: AgentConfig::default(),
            supervision: SupervisionConfig::default(),
            daemon: DaemonConfig::default(),
        }
    }
}

impl Config {
    /// The defaults, with `home` as Ryvos's directory.
    pub fn with_home(home: impl Into<PathBuf>) -> Self {
        Self {
            home: home.into(),
            ..Self::default()
        }
    }

    /// The database file.
    pub fn database_path(&self) -> PathBuf {
        self.home.join("ryvos.redb")
    }
}

/// `$RYVOS_HOME`, else `~/.ryvos`.
pub fn default_home() -> PathBuf {
    if let Some(home) = std::env::var_os("RYVOS_HOME") {
        return PathBuf::from(home);
    }
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
        .join(".ryvos")
}
