//! The runtime's configuration: `config.toml`, or a host application's own values.
//!
//! Found at `--config PATH`, else `$RYVOS_HOME/config.toml`, else the built-in defaults. Every
//! section rejects keys it does not know and values of the wrong type, with an error that names
//! the file, the line and the key, so a typo never turns into a silently ignored setting.

mod a2a;
mod http;
mod overrides;

pub use a2a::{A2aConfig, A2aSkill};
pub use http::{HttpConfig, HttpDoor};

pub use overrides::{Override, OverrideSyntaxError};
use ryvos_actors::config::expand_env;
pub use ryvos_actors::config::{
    AgentConfig, BudgetConfig, CheckpointConfig, Decision, DirectorConfig, EmbeddingConfig,
    Fallback, FallbackEndpoint, GuardianConfig, HookSpec, HooksConfig, InDoubt, JudgeConfig,
    MaxTokensField, McpConfig, McpServerConfig, ModelConfig, OnLimit, OtelConfig, OtlpProtocol,
    Pricing, RewindConfig, SandboxConfig, SandboxMode, SecurityConfig, StoreBackend, StoreConfig,
    SupervisionConfig, TierPolicy,
};
pub use ryvos_actors::GuardrailConfig;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Everything a [`crate::Runtime`] and `ryvosd` are started with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where Ryvos keeps its database, logs and socket (`$RYVOS_HOME`, default `~/.ryvos`).
    #[serde(skip)]
    pub home: PathBuf,
    /// The file these settings were read from; `None` for the built-in defaults.
    #[serde(skip)]
    pub source: Option<PathBuf>,
    pub model: ModelConfig,
    pub agent: AgentConfig,
    pub budget: BudgetConfig,
    pub embedding: EmbeddingConfig,
    pub security: SecurityConfig,
    pub guardrails: GuardrailConfig,
    pub daemon: DaemonConfig,
    pub supervision: SupervisionConfig,
    /// MCP servers whose tools the model may call.
    pub mcp: McpConfig,
    /// Which backend keeps what must survive a crash.
    pub store: StoreConfig,
    /// OpenTelemetry traces and metrics (off by default).
    pub otel: OtelConfig,
    /// The console's HTTP door in `ryvosd` (off by default).
    pub http: HttpConfig,
    /// The A2A door on that listener (off by default).
    pub a2a: A2aConfig,
    /// Workspace snapshots for `rewind` and `fork`.
    pub rewind: RewindConfig,
    /// A person's programs run at each step of a run (`[[hooks.PreToolUse]]`, …).
    pub hooks: HooksConfig,
}

/// `[daemon]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DaemonConfig {
    /// The socket's path; `$RYVOS_HOME` and `${VAR}` are expanded.
    pub socket: String,
    /// Runs in flight past this are answered "busy", never queued without bound.
    pub max_in_flight_runs: usize,
    /// A program (and its arguments) run when a run parks: the `RunParked` event as JSON on
    /// its stdin, `RYVOS_RUN_ID`, `RYVOS_SESSION_ID` and `RYVOS_PARK_REASON` set. Empty: none.
    pub notify_command: Vec<String>,
    /// A webhook the `RunParked` event is POSTed to as JSON when a run parks. Empty: none.
    #[serde(deserialize_with = "web_address")]
    pub notify_url: String,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        Self {
            socket: "$RYVOS_HOME/ryvosd.sock".into(),
            max_in_flight_runs: 64,
            notify_command: Vec::new(),
            notify_url: String::new(),
        }
    }
}

/// An `http://` or `https://` address, or nothing.
fn web_address<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let url = String::deserialize(d)?;
    if url.is_empty() || url.starts_with("http://") || url.starts_with("https://") {
        Ok(url)
    } else {
        Err(serde::de::Error::custom(format!(
            "'{url}' is not an http:// or https:// address"
        )))
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            home: default_home(),
            source: None,
            model: ModelConfig::default(),
            agent: AgentConfig::default(),
            budget: BudgetConfig::default(),
            embedding: EmbeddingConfig::default(),
            security: SecurityConfig::default(),
            guardrails: GuardrailConfig::default(),
            daemon: DaemonConfig::default(),
            supervision: SupervisionConfig::default(),
            mcp: McpConfig::default(),
            store: StoreConfig::default(),
            otel: OtelConfig::default(),
            http: HttpConfig::default(),
            a2a: A2aConfig::default(),
            rewind: RewindConfig::default(),
            hooks: HooksConfig::default(),
        }
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the config file {path}: {cause}")]
    Read { path: PathBuf, cause: String },
    #[error("{path}:{line}: {key}: {message}\n  {hint}")]
    Invalid {
        path: PathBuf,
        line: usize,
        key: String,
        message: String,
        /// What to do about it.
        hint: String,
    },
    /// A command-line setting (`-c`, `--model`, `--max-turns`) that the file would refuse too.
    #[error("{given}: {key}: {message}\n  give a valid value; `ryvos config` prints every key with its value")]
    Override {
        given: String,
        key: String,
        message: String,
    },
    #[error("{0}")]
    Value(String),
}

impl Config {
    /// The defaults, with `home` as Ryvos's directory.
    pub fn with_home(home: impl Into<PathBuf>) -> Self {
        Self {
            home: home.into(),
            ..Self::default()
        }
    }

    /// Loads `explicit`, else `$RYVOS_HOME/config.toml` if it exists, else the defaults.
    pub fn load(explicit: Option<&Path>) -> Result<Config, ConfigError> {
        Self::load_with(explicit, &[])
    }

    /// Loads as [`Config::load`] does, with `overrides` laid over the file's settings.
    pub fn load_with(
        explicit: Option<&Path>,
        overrides: &[Override],
    ) -> Result<Config, ConfigError> {
        let home = default_home();
        let path = match explicit {
            Some(p) => Some(p.to_path_buf()),
            None => Some(home.join("config.toml")).filter(|p| p.exists()),
        };
        let mut config = match path {
            Some(path) => {
                let text = std::fs::read_to_string(&path).map_err(|e| ConfigError::Read {
                    path: path.clone(),
                    cause: e.to_string(),
                })?;
                let mut config = Self::parse(&text, &path)?;
                if !overrides.is_empty() {
                    // The file is valid TOML: it was just parsed.
                    let read = toml::from_str(&text).unwrap_or_default();
                    config = Self::overridden(read, overrides)?;
                }
                config.source = Some(std::path::absolute(&path).unwrap_or(path.clone()));
                // A recording named in a config file is found next to it.
                let replay = Path::new(&config.model.replay_file);
                if replay.is_relative() && !config.model.replay_file.is_empty() {
                    if let Some(dir) = path.parent() {
                        config.model.replay_file = dir.join(replay).to_string_lossy().into_owned();
                    }
                }
                config
            }
            None if overrides.is_empty() => Config::default(),
            None => Self::overridden(toml::Table::new(), overrides)?,
        };
        config.home = home;
        Ok(config)
    }

    /// The settings `read` with `overrides` laid over them; when they are refused, the message
    /// names the flag that the file refuses on its own.
    fn overridden(mut read: toml::Table, overrides: &[Override]) -> Result<Config, ConfigError> {
        let refused =
            |given: &str, e: serde_path_to_error::Error<toml::de::Error>| ConfigError::Override {
                given: given.to_owned(),
                key: e.path().to_string(),
                message: e.into_inner().message().to_owned(),
            };
        let file = read.clone();
        for setting in overrides {
            setting.apply_to(&mut read);
        }
        let all_refused = match serde_path_to_error::deserialize(read) {
            Ok(config) => return Ok(config),
            Err(e) => e,
        };
        // Blamed on the first setting the file refuses by itself, else on them together.
        for setting in overrides {
            let mut with_it = file.clone();
            setting.apply_to(&mut with_it);
            if let Err(e) = serde_path_to_error::deserialize::<_, Config>(with_it) {
                return Err(refused(&setting.given, e));
            }
        }
        let given = overrides
            .iter()
            .map(|o| o.given.as_str())
            .collect::<Vec<_>>();
        Err(refused(&given.join(" "), all_refused))
    }

    /// Parses a config file's text; `path` is for messages.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let invalid = |span: Option<std::ops::Range<usize>>, key: String, message: String| {
            let line = span.map_or(1, |s| {
                text[..s.start.min(text.len())].matches('\n').count() + 1
            });
            let syntax = key.is_empty() || key == ".";
            let hint = if syntax {
                "fix the TOML syntax there".to_owned()
            } else {
                format!("fix or remove `{key}`; `ryvos config` prints every key with its value")
            };
            ConfigError::Invalid {
                path: path.to_path_buf(),
                line,
                key: if syntax { "(syntax)".into() } else { key },
                message,
                hint,
            }
        };
        let deserializer = toml::de::Deserializer::parse(text)
            .map_err(|e| invalid(e.span(), String::new(), e.message().to_owned()))?;
        serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner();
            invalid(inner.span(), key, inner.message().to_owned())
        })
    }

    /// The database file.
    pub fn database_path(&self) -> PathBuf {
        self.home.join("ryvos.redb")
    }

    /// The daemon's socket, with `$RYVOS_HOME` and `${VAR}` expanded.
    pub fn socket_path(&self) -> Result<PathBuf, ConfigError> {
        let raw = self
            .daemon
            .socket
            .replace("${RYVOS_HOME}", "$RYVOS_HOME")
            .replace("$RYVOS_HOME", &self.home.to_string_lossy());
        let expanded =
            expand_env(&raw, "daemon.socket").map_err(|e| ConfigError::Value(e.to_string()))?;
        Ok(PathBuf::from(expanded))
    }

    /// Where run logs go.
    pub fn logs_dir(&self) -> PathBuf {
        self.home.join("logs")
    }
}

/// `$RYVOS_HOME`, else `~/.ryvos`.
pub fn default_home() -> PathBuf {
    if let Some(home) = std::env::var_os("RYVOS_HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(home);
    }
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
        .join(".ryvos")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("config.toml"))
    }

    #[test]
    fn an_empty_file_gives_the_contract_defaults() {
        let c = parse("").unwrap();
        assert_eq!(c.model.provider, "openai");
        assert_eq!(c.model.model, "gpt-4o-mini");
        assert_eq!(c.model.api_key, "${OPENAI_API_KEY}");
        assert_eq!(c.agent.max_turns, 25);
        assert_eq!(c.agent.max_duration_secs, 600);
        assert_eq!(c.agent.max_context_tokens, 32000);
        assert!(c.agent.parallel_tools && c.agent.enable_summarization);
        assert_eq!(c.agent.min_tail, 6);
        assert!(c.agent.checkpoint.enabled && c.agent.guardian.enabled);
        assert_eq!(c.agent.guardian.doom_loop_threshold, 3);
        assert_eq!(c.agent.guardian.stall_timeout_secs, 120);
        assert_eq!(
            (
                c.agent.guardian.token_budget_soft,
                c.agent.guardian.token_budget_hard
            ),
            (80, 95)
        );
        assert_eq!(c.budget.monthly_limit_cents, 5000);
        assert_eq!(c.budget.warning_threshold_cents, 4000);
        assert_eq!(c.budget.per_run_limit_cents, 100);
        assert_eq!(
            c.security.auto_approve,
            ["read", "glob", "grep", "memory_search"]
        );
        assert_eq!(c.security.approval_timeout_secs, 60);
        assert_eq!(c.daemon.socket, "$RYVOS_HOME/ryvosd.sock");
        assert_eq!(c.daemon.max_in_flight_runs, 64);
    }

    #[test]
    fn a_wrong_type_names_the_key_and_its_line() {
        let err = parse("[model]\nmodel = \"m\"\n\n[agent]\nmax_turns = \"many\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("config.toml:5: agent.max_turns:"), "{err}");
    }

    #[test]
    fn bad_values_are_refused_at_load_with_their_key_and_line() {
        let err = |text: &str| parse(text).unwrap_err().to_string();
        let url = err("[model]\nprovider = \"openai\"\nbase_url = \"not a url\"\n");
        assert!(url.starts_with("config.toml:3: model.base_url:"), "{url}");
        assert!(url.contains("is not a URL"), "{url}");
        let ftp = err("[model]\nbase_url = \"ftp://example.com/v1\"\n");
        assert!(
            ftp.contains("config.toml:2: model.base_url:") && ftp.contains("ftp URL"),
            "{ftp}"
        );
        let provider = err("[model]\nprovider = \"nope\"\n");
        assert!(
            provider.starts_with("config.toml:2: model.provider: unknown provider 'nope'"),
            "{provider}"
        );
        let turns = err("[agent]\nmax_turns = 0\n");
        assert!(
            turns.starts_with("config.toml:2: agent.max_turns: must be at least 1"),
            "{turns}"
        );
        let syntax = err("[model\n");
        assert!(
            syntax.contains("fix the TOML syntax") && !syntax.contains("fix or remove"),
            "{syntax}"
        );
    }

    #[test]
    fn an_unknown_key_names_the_key_and_its_line() {
        let err = parse("[agent]\nmax_turns = 3\nmax_tunrs = 4\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("config.toml:3: agent"), "{err}");
        assert!(err.contains("max_tunrs"), "{err}");
        let err = parse(
            "[budget.pricing_overrides]\n\"m\" = { input_per_1m = 1, output_per_1m = \"x\" }\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(":2: budget.pricing_overrides.m.output_per_1m"),
            "{err}"
        );
    }

    #[test]
    fn overrides_are_laid_over_the_file_and_checked_like_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, "[agent]\nmax_turns = 3\nmin_tail = 4\n").unwrap();
        let set = |given: &str| given.parse::<Override>().unwrap();
        let c = Config::load_with(
            Some(&file),
            &[set("agent.max_turns=9"), set("model.model=gpt-4o")],
        )
        .unwrap();
        assert_eq!((c.agent.max_turns, c.agent.min_tail), (9, 4));
        assert_eq!(c.model.model, "gpt-4o");
        assert_eq!(c.source.as_deref(), Some(file.as_path()));
        let err = Config::load_with(Some(&file), &[set("agent.max_turns=0")])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("agent.max_turns=0: agent.max_turns: must be at least 1"),
            "{err}"
        );
        let err = Config::load_with(None, &[set("agent.max_tunrs=2")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_tunrs"), "{err}");
        // A setting of a table the file defines is checked with the rest of it.
        std::fs::write(&file, "[mcp.servers.files]\ncommand = \"server\"\n").unwrap();
        let c = Config::load_with(Some(&file), &[set("mcp.servers.files.tier=\"T1\"")]).unwrap();
        assert_eq!(c.mcp.servers["files"].tier, ryvos_protocol::SafetyTier::T1);
    }

    #[test]
    fn the_socket_path_expands_the_home() {
        let mut c = Config::with_home("/srv/ryvos");
        assert_eq!(
            c.socket_path().unwrap(),
            PathBuf::from("/srv/ryvos/ryvosd.sock")
        );
        c.daemon.socket = "${RYVOS_TEST_NEVER_SET_9}/s".into();
        assert!(c
            .socket_path()
            .unwrap_err()
            .to_string()
            .contains("RYVOS_TEST_NEVER_SET_9"));
    }
}

#[cfg(test)]
mod documented {
    use super::*;

    /// config/ryvos.toml documents every key with its default: it must parse, to the defaults.
    #[test]
    fn the_documented_config_is_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/ryvos.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let parsed = Config::parse(&text, &path).unwrap();
        assert_eq!(parsed, Config::with_home(parsed.home.clone()));
    }

    #[test]
    fn a_park_webhook_must_be_a_web_address() {
        let path = Path::new("ryvos.toml");
        let bad = Config::parse("[daemon]\nnotify_url = \"ftp://example.com/x\"\n", path)
            .unwrap_err()
            .to_string();
        assert!(
            bad.contains("daemon.notify_url") && bad.contains("http://"),
            "{bad}"
        );
        let good = Config::parse("[daemon]\nnotify_url = \"https://example.com/x\"\n", path);
        assert_eq!(good.unwrap().daemon.notify_url, "https://example.com/x");
    }
}
