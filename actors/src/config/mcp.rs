//! `[mcp.servers.NAME]`: the MCP servers whose tools the model may call, each started as a
//! child process (`command`) or reached over Streamable HTTP (`url`).

use ryvos_protocol::effect::Effect;
use ryvos_protocol::tier::SafetyTier;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// `[mcp]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// By name: the name prefixes its tools (`NAME__tool`).
    #[serde(deserialize_with = "server_names")]
    pub servers: BTreeMap<String, McpServerConfig>,
}

/// One MCP server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpServerConfig {
    /// The program to start (stdio transport); `${VAR}` is expanded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    pub args: Vec<String>,
    /// Set in the server's environment (besides Ryvos's own); `${VAR}` is expanded.
    pub env: BTreeMap<String, String>,
    /// The server's endpoint (Streamable HTTP), instead of `command`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Sent with every HTTP request, e.g. `Authorization = "Bearer ${TOKEN}"`.
    pub headers: BTreeMap<String, String>,
    /// The tier of its tools, for the security gate (default T2: the default policy asks).
    pub tier: SafetyTier,
    /// Tiers of single tools, over `tier`.
    pub tool_tiers: BTreeMap<String, SafetyTier>,
    /// The longest one call may take.
    pub timeout_secs: u64,
    /// How long the server has to start and list its tools.
    pub startup_timeout_secs: u64,
    /// Only these tools are offered (all when left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled_tools: Option<Vec<String>>,
    /// What its tools' calls may do, for their recovery after a crash, over what the server
    /// says of each (`readOnlyHint`, `idempotentHint`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect: Option<Effect>,
    /// The same, for single tools, over `effect`: `effects = { charge = "idempotent" }`.
    pub effects: BTreeMap<String, Effect>,
}

impl Default for McpServerConfig {
    fn default() -> Self {
        Self {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
            tier: SafetyTier::T2,
            tool_tiers: BTreeMap::new(),
            timeout_secs: 60,
            startup_timeout_secs: 60,
            enabled_tools: None,
            effect: None,
            effects: BTreeMap::new(),
        }
    }
}

impl McpConfig {
    /// The longest any server may take to start: what a run waits at most.
    pub fn longest_startup(&self) -> Duration {
        self.servers
            .values()
            .map(McpServerConfig::startup_timeout)
            .max()
            .unwrap_or_default()
    }
}

impl McpServerConfig {
    /// How it is reached, for reports: `stdio: COMMAND` or `http: URL`.
    pub fn transport(&self) -> String {
        match (&self.command, &self.url) {
            (Some(command), _) => format!("stdio: {command}"),
            (None, Some(url)) => format!("http: {url}"),
            (None, None) => String::new(),
        }
    }

    /// The longest one call may take.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs.max(1))
    }

    /// How long the server has to start and list its tools.
    pub fn startup_timeout(&self) -> Duration {
        Duration::from_secs(self.startup_timeout_secs.max(1))
    }

    /// The tier of the server's tool `tool`.
    pub fn tier_of(&self, tool: &str) -> SafetyTier {
        self.tool_tiers.get(tool).copied().unwrap_or(self.tier)
    }

    /// What a call of the server's tool `tool` may do: as configured for it, else for the
    /// server, else as the server `said` (its annotations), else as its tier says.
    pub fn effect_of(&self, tool: &str, said: Option<Effect>) -> Effect {
        let by_tier = Effect::of_tier(self.tier_of(tool));
        (self.effects.get(tool).copied())
            .or(self.effect)
            .or(said)
            .unwrap_or(by_tier)
    }

    /// Whether the tool `tool` is offered.
    pub fn offers(&self, tool: &str) -> bool {
        self.enabled_tools
            .as_ref()
            .is_none_or(|enabled| enabled.iter().any(|t| t == tool))
    }
}

/// Server names become tool-name prefixes (`NAME__tool`), which models accept only as
/// `[A-Za-z0-9_-]`; each server needs exactly one of `command` and `url`.
fn server_names<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, McpServerConfig>, D::Error> {
    let servers = BTreeMap::<String, McpServerConfig>::deserialize(d)?;
    for (name, server) in &servers {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            || name.contains("__")
        {
            return Err(serde::de::Error::custom(format!(
                "the server name '{name}' prefixes its tools' names: use letters, digits, '-' \
                 and single '_'"
            )));
        }
        match (&server.command, &server.url) {
            (Some(_), Some(_)) => {
                return Err(serde::de::Error::custom(format!(
                    "mcp.servers.{name} has both command and url: give one (command starts a \
                     local server, url reaches a remote one)"
                )))
            }
            (None, None) => {
                return Err(serde::de::Error::custom(format!(
                    "mcp.servers.{name} has neither command nor url: give one"
                )))
            }
            // With a `${VAR}` in it, it is checked once expanded, where the server is reached.
            (None, Some(url)) if url.contains("${") => {}
            (None, Some(url)) => super::checked::check_http_url(url).map_err(|why| {
                serde::de::Error::custom(format!("mcp.servers.{name}.url: {why}"))
            })?,
            _ => {}
        }
    }
    Ok(servers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_is_a_command_or_a_url_and_its_name_a_prefix() {
        let ok: McpConfig = toml::from_str(
            "[servers.files]\ncommand = \"npx\"\nargs = [\"-y\", \"x\"]\ntier = \"T1\"\n\
             [servers.tracker]\nurl = \"https://mcp.example.com/mcp\"\n",
        )
        .unwrap();
        assert_eq!(ok.servers["files"].tier, SafetyTier::T1);
        assert_eq!(ok.servers["tracker"].tier, SafetyTier::T2);
        for bad in [
            "[servers.x]\ncommand = \"a\"\nurl = \"http://h\"\n",
            "[servers.x]\nargs = []\n",
            "[servers.\"a b\"]\ncommand = \"a\"\n",
            "[servers.a__b]\ncommand = \"a\"\n",
        ] {
            assert!(toml::from_str::<McpConfig>(bad).is_err(), "{bad}");
        }
    }
}
