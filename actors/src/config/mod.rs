//! The engine's settings: the `[model]`, `[agent]`, `[budget]`, `[embedding]`, `[supervision]`
//! and (in [`security`]) `[security]` sections of `config.toml`.
//!
//! Every section has the defaults of the public contract, and rejects keys it does not know, so a
//! typo is an error instead of a silently ignored setting.

mod checked;
mod hooks;
pub(crate) use checked::check_http_url;
mod mcp;
mod otel;
mod rewind;
mod security;
mod store;

pub use hooks::{HookSpec, HooksConfig, ProjectHooks, PROJECT_HOOKS_FILE};
pub use mcp::{McpConfig, McpServerConfig};
pub use otel::{OtelConfig, OtlpProtocol};
pub use rewind::RewindConfig;
pub use ryvos_protocol::records::OnLimit;
pub use security::{Decision, SandboxConfig, SandboxMode, SecurityConfig, TierPolicy};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
pub use store::{StoreBackend, StoreConfig};

/// Which model answers, and how to reach it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelConfig {
    /// `"openai"` (any OpenAI-compatible endpoint) or `"anthropic"`.
    #[serde(deserialize_with = "checked::provider")]
    pub provider: String,
    pub model: String,
    #[serde(deserialize_with = "checked::http_url")]
    pub base_url: String,
    /// May hold `${VAR}`; resolved only when a request is made.
    pub api_key: String,
    /// When given, replaces `api_key`; the next key is used after a 429.
    pub api_keys: Vec<String>,
    /// Tried in order once the primary model is exhausted: other models of this provider
    /// (a name), then other providers (a table).
    pub fallbacks: Vec<Fallback>,
    /// For `provider = "replay"`: the recording to answer from.
    pub replay_file: String,
    /// Seconds a model stream may stay silent before it is cut.
    pub stream_idle_timeout_secs: u64,
    /// Seconds to wait for the TCP/TLS connection to the model server.
    pub connect_timeout_secs: u64,
    /// The longest answer asked for, sent to every provider (0: not sent to OpenAI-compatible
    /// servers, which then stop at their own limit; Anthropic always needs one).
    pub max_output_tokens: u32,
    /// The field an OpenAI-compatible request carries the limit in.
    pub max_tokens_field: MaxTokensField,
    /// Attempts after the first, per model, for a transient failure (429, 5xx, a dropped
    /// connection, a timeout, a stream cut short).
    pub max_retries: u32,
    /// The first backoff in milliseconds; it doubles with each retry, with jitter.
    pub retry_base_ms: u64,
    /// No backoff is longer than this.
    pub retry_max_backoff_secs: u64,
    /// A server asking to wait longer than this is not waited for: the next fallback is tried.
    pub max_retry_after_secs: u64,
    /// All attempts of one model, waits included, end within this (each fallback has its
    /// own).
    pub call_deadline_secs: u64,
}

/// How an OpenAI-compatible request names its output limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// `max_tokens`: OpenAI's chat models, vLLM, llama.cpp, Ollama, OpenRouter.
    MaxTokens,
    /// `max_completion_tokens`: required by OpenAI's reasoning models (o1, o3, gpt-5).
    MaxCompletionTokens,
}

/// A model to fall back on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Fallback {
    /// Another model of the primary's provider, endpoint and keys.
    Model(String),
    /// A model of another provider or endpoint.
    Endpoint(FallbackEndpoint),
}

/// A fallback on another provider or endpoint; what it leaves out is the primary's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FallbackEndpoint {
    pub provider: String,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_keys: Vec<String>,
}

impl Fallback {
    /// The `[model]` this fallback stands for: the primary's, with what the fallback names.
    pub fn resolve(&self, primary: &ModelConfig) -> ModelConfig {
        let mut config = primary.clone();
        config.fallbacks = Vec::new();
        match self {
            Fallback::Model(model) => config.model = model.clone(),
            Fallback::Endpoint(e) => {
                let elsewhere = e.base_url.as_ref().is_some_and(|u| *u != primary.base_url);
                if e.provider != primary.provider || elsewhere {
                    // Another endpoint never gets the primary's keys.
                    if e.provider != primary.provider {
                        config.base_url = default_base_url(&e.provider).to_owned();
                    }
                    config.api_key = default_api_key(&e.provider).to_owned();
                    config.api_keys = Vec::new();
                }
                config.provider = e.provider.clone();
                config.model = e.model.clone();
                if let Some(url) = &e.base_url {
                    config.base_url = url.clone();
                }
                if let Some(key) = &e.api_key {
                    config.api_key = key.clone();
                    config.api_keys = Vec::new();
                }
                if !e.api_keys.is_empty() {
                    config.api_keys = e.api_keys.clone();
                }
            }
        }
        config
    }

    /// The model's name, for messages.
    pub fn model(&self) -> &str {
        match self {
            Fallback::Model(m) => m,
            Fallback::Endpoint(e) => &e.model,
        }
    }
}

/// A provider's usual endpoint.
pub fn default_base_url(provider: &str) -> &'static str {
    match provider {
        "anthropic" => "https://api.anthropic.com/v1",
        _ => "https://api.openai.com/v1",
    }
}

/// A provider's usual key variable.
pub fn default_api_key(provider: &str) -> &'static str {
    match provider {
        "anthropic" => "${ANTHROPIC_API_KEY}",
        _ => "${OPENAI_API_KEY}",
    }
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            provider: "openai".into(),
            model: "gpt-4o-mini".into(),
            base_url: "https://api.openai.com/v1".into(),
            api_key: "${OPENAI_API_KEY}".into(),
            api_keys: Vec::new(),
            fallbacks: Vec::new(),
            replay_file: String::new(),
            stream_idle_timeout_secs: 120,
            connect_timeout_secs: 10,
            max_output_tokens: 8192,
            max_tokens_field: MaxTokensField::MaxTokens,
            max_retries: 3,
            retry_base_ms: 500,
            retry_max_backoff_secs: 10,
            max_retry_after_secs: 60,
            call_deadline_secs: 300,
        }
    }
}

/// How a run is driven.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    /// Model calls per run before it stops with status `max_turns`.
    #[serde(deserialize_with = "checked::positive")]
    pub max_turns: u32,
    /// Wall-clock seconds per run before it stops with status `timeout`.
    #[serde(deserialize_with = "checked::positive")]
    pub max_duration_secs: u64,
    #[serde(deserialize_with = "checked::positive")]
    pub max_context_tokens: u64,
    /// Run the tool calls of one response concurrently.
    pub parallel_tools: bool,
    /// At most this many calls of one response run at once.
    pub max_parallel_tools: usize,
    pub enable_summarization: bool,
    /// Below a summary, at most this many exact facts (ids, numbers with units, paths, URLs,
    /// commands run) of the summarized part that the summary left out are kept verbatim.
    pub summary_facts: usize,
    pub min_tail: usize,
    /// A tool call still running after this many seconds is stopped and reported as failed.
    pub tool_timeout_secs: u64,
    /// Tool output beyond this many bytes is cut before the model sees it (head kept, a note
    /// says what was cut).
    pub max_tool_output_bytes: usize,
    /// An idle session's actor stops after this many seconds and is revived on its next run.
    pub session_idle_secs: u64,
    /// A call a crash cut off that is unsafe to repeat (`ask`: a person decides whether it
    /// runs again; `tell_model`: the model is told it may or may not have run).
    pub in_doubt: InDoubt,
    pub checkpoint: CheckpointConfig,
    pub guardian: GuardianConfig,
    pub judge: JudgeConfig,
    pub director: DirectorConfig,
}

/// `[agent] in_doubt`: what becomes of an unsafe call a crash cut off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InDoubt {
    /// Asked of a person, as an approval (`ryvos approvals` lists it, kind `in_doubt`).
    #[default]
    Ask,
    /// The model is told the call may or may not have run, and decides.
    TellModel,
}

/// `[agent.director]`: how Director runs plan and execute.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DirectorConfig {
    /// A plan with more steps is refused (and asked for again).
    pub max_steps: usize,
    /// Independent steps running at once.
    pub max_parallel_steps: usize,
    /// Times the model is asked for a valid plan before the run fails.
    pub plan_attempts: u32,
    /// Runs of a failed step after its first; then the plan is revised, once.
    pub step_retries: u32,
}

impl Default for DirectorConfig {
    fn default() -> Self {
        Self {
            max_steps: 12,
            max_parallel_steps: 4,
            plan_attempts: 3,
            step_retries: 1,
        }
    }
}

/// `[agent.judge]`: how goal-driven runs are judged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JudgeConfig {
    /// The model that judges `llm` criteria (and goals without criteria); `""`: the run's.
    pub model: String,
    /// The weighted share of criteria that must be met for the goal to be accepted (0–1].
    pub accept_threshold: f64,
    /// `Retry` verdicts a run may get; past them it escalates.
    pub max_retries: u32,
    /// Also judge every this many turns, to stop as soon as the goal is met (0: only final
    /// answers are judged).
    pub evaluate_every_turns: u32,
    /// A `command` criterion running longer fails.
    pub command_timeout_secs: u64,
    /// An escalation (the Judge's, or retries used up) parks the run for a person to look at,
    /// instead of ending it `escalated`: `ryvos continue RUN` sends it back to work.
    pub park_on_escalate: bool,
}

impl Default for JudgeConfig {
    fn default() -> Self {
        Self {
            model: String::new(),
            accept_threshold: 1.0,
            max_retries: 3,
            evaluate_every_turns: 0,
            command_timeout_secs: 300,
            park_on_escalate: false,
        }
    }
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            max_turns: 25,
            max_duration_secs: 600,
            max_context_tokens: 32_000,
            parallel_tools: true,
            max_parallel_tools: 8,
            enable_summarization: true,
            summary_facts: 20,
            min_tail: 6,
            tool_timeout_secs: 300,
            max_tool_output_bytes: 32 * 1024,
            session_idle_secs: 300,
            in_doubt: InDoubt::Ask,
            checkpoint: CheckpointConfig::default(),
            guardian: GuardianConfig::default(),
            judge: JudgeConfig::default(),
            director: DirectorConfig::default(),
        }
    }
}

impl AgentConfig {
    /// `max_duration_secs` as a duration.
    pub fn max_duration(&self) -> Duration {
        Duration::from_secs(self.max_duration_secs)
    }
}

/// `[agent.checkpoint]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckpointConfig {
    /// When false, turns are still stored but commits are not forced to disk (no fsync): a
    /// crash may lose the most recent turns. For throwaway runs only.
    pub enabled: bool,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        Self { enabled: true }
    }
}

/// `[agent.guardian]`: read by the Guardian.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GuardianConfig {
    pub enabled: bool,
    pub doom_loop_threshold: u32,
    pub stall_timeout_secs: u64,
    /// Percent of `max_context_tokens`: warning.
    pub token_budget_soft: u8,
    /// Percent of `max_context_tokens`: the run stops after the current turn.
    pub token_budget_hard: u8,
}

impl Default for GuardianConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            doom_loop_threshold: 3,
            stall_timeout_secs: 120,
            token_budget_soft: 80,
            token_budget_hard: 95,
        }
    }
}

/// `[budget]`: read by the cost ledger. A limit of 0 turns that check off.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetConfig {
    pub monthly_limit_cents: u64,
    pub warning_threshold_cents: u64,
    pub per_run_limit_cents: u64,
    /// What a run does at its per-run budget or the month's limit: park until continued, or
    /// stop (`budget_exceeded`).
    pub on_limit: OnLimit,
    /// Model name -> price in cents per million tokens.
    pub pricing_overrides: BTreeMap<String, Pricing>,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            monthly_limit_cents: 5000,
            warning_threshold_cents: 4000,
            per_run_limit_cents: 100,
            on_limit: OnLimit::Park,
            pricing_overrides: BTreeMap::new(),
        }
    }
}

/// A model's price, in cents per million tokens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pricing {
    pub input_per_1m: f64,
    pub output_per_1m: f64,
}

/// `[embedding]`: vectors for memory search, from an OpenAI-compatible `/embeddings` endpoint.
/// Off until `provider` is set; then search is hybrid: keyword (BM25) and vector similarity,
/// weighed and held to a floor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbeddingConfig {
    /// `""` (off) or `"openai"` (any OpenAI-compatible endpoint).
    pub provider: String,
    pub model: String,
    pub base_url: String,
    /// May hold `${VAR}`; resolved only when a request is made.
    pub api_key: String,
    /// When given, replaces `api_key`; the next key is used after a 429.
    pub api_keys: Vec<String>,
    /// The keyword score's weight in a hybrid score.
    pub keyword_weight: f64,
    /// The vector similarity's weight in a hybrid score.
    pub vector_weight: f64,
    /// Memories scoring under this are never recalled.
    pub relevance_floor: f64,
    /// Seconds an embeddings request may take, its retries included (retried as `[model]`
    /// says: `max_retries`, `retry_base_ms`, `retry_max_backoff_secs`, `max_retry_after_secs`).
    pub timeout_secs: u64,
}

impl Default for EmbeddingConfig {
    fn default() -> Self {
        Self {
            provider: String::new(),
            model: "text-embedding-3-small".into(),
            base_url: "https://api.openai.com/v1".into(),
            api_key: "${OPENAI_API_KEY}".into(),
            api_keys: Vec::new(),
            keyword_weight: 0.3,
            vector_weight: 0.7,
            relevance_floor: 0.4,
            timeout_secs: 30,
        }
    }
}

/// `[supervision]`: how failed actors are restarted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SupervisionConfig {
    /// Delay before the first restart of a failed actor; doubled on each further restart.
    pub backoff_initial_ms: u64,
    /// The longest delay between restarts.
    pub backoff_max_ms: u64,
    /// More than this many restarts of one actor within `restart_window_secs` escalates: the
    /// supervisor gives up and the runtime stops with an error.
    pub max_restarts: u32,
    pub restart_window_secs: u64,
}

impl Default for SupervisionConfig {
    fn default() -> Self {
        Self {
            backoff_initial_ms: 100,
            backoff_max_ms: 10_000,
            max_restarts: 5,
            restart_window_secs: 60,
        }
    }
}

/// Expands `${VAR}` references in `value` from the environment.
///
/// Called where a value is used, so an unset variable is an error only for values that matter;
/// the error names the variable and where it was wanted.
pub fn expand_env(value: &str, key: &str) -> Result<String, EnvVarError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(EnvVarError::Unterminated {
                key: key.to_owned(),
            });
        };
        let name = &after[..end];
        match std::env::var(name) {
            Ok(v) => out.push_str(&v),
            Err(_) => {
                return Err(EnvVarError::Unset {
                    key: key.to_owned(),
                    var: name.to_owned(),
                })
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A `${VAR}` reference that cannot be expanded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EnvVarError {
    #[error("{key} refers to ${{{var}}}, but the environment variable {var} is not set; set it or change {key} in config.toml")]
    Unset { key: String, var: String },
    #[error("{key} has a `${{` without its closing `}}`")]
    Unterminated { key: String },
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_fallback_on_another_endpoint_never_inherits_the_primarys_keys() {
        let primary = ModelConfig {
            api_keys: vec!["${PRIMARY_KEY}".into()],
            ..ModelConfig::default()
        };
        let elsewhere = Fallback::Endpoint(FallbackEndpoint {
            provider: "openai".into(),
            model: "some/model".into(),
            base_url: Some("https://openrouter.ai/api/v1".into()),
            api_key: None,
            api_keys: Vec::new(),
        })
        .resolve(&primary);
        assert_eq!(elsewhere.api_key, "${OPENAI_API_KEY}");
        assert!(elsewhere.api_keys.is_empty());
        let anthropic = Fallback::Endpoint(FallbackEndpoint {
            provider: "anthropic".into(),
            model: "claude-haiku-4-5".into(),
            base_url: None,
            api_key: None,
            api_keys: Vec::new(),
        })
        .resolve(&primary);
        assert_eq!(anthropic.base_url, "https://api.anthropic.com/v1");
        assert_eq!(anthropic.api_key, "${ANTHROPIC_API_KEY}");
        let same = Fallback::Model("gpt-4o".into()).resolve(&primary);
        assert_eq!(same.api_keys, primary.api_keys);
    }

    use super::*;

    #[test]
    fn expands_and_names_the_unset_variable() {
        std::env::set_var("RYVOS_TEST_EXPAND_A", "alpha");
        assert_eq!(
            expand_env("x-${RYVOS_TEST_EXPAND_A}-y", "model.api_key").unwrap(),
            "x-alpha-y"
        );
        let err = expand_env("${RYVOS_TEST_NEVER_SET_42}", "model.api_key").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("RYVOS_TEST_NEVER_SET_42") && text.contains("model.api_key"));
        assert!(expand_env("${OPEN", "k").is_err());
        assert_eq!(expand_env("plain", "k").unwrap(), "plain");
    }
}
