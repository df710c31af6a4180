//! Whether the configured model server can be used, without asking it anything billable:
//! the key's variable is set, the server answers, and it does not refuse the key. For
//! `ryvos doctor`.

use super::http::{self, transport_error};
use super::keys::ApiKeys;
use super::{with_provider_defaults, ProviderError};
use crate::config::{Fallback, ModelConfig};
use std::time::Duration;

/// How long the server has to answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether every API key of the model chain (the primary's, then each fallback's) can be
/// expanded here: checked by the process that will send them, when it starts, so an unset
/// variable is named at once rather than at the first model call.
pub fn keys_set(config: &ModelConfig) -> Result<(), ProviderError> {
    let primary = with_provider_defaults(config);
    let mut chain = vec![(primary.clone(), "model.api_key")];
    for fallback in &config.fallbacks {
        if let Fallback::Endpoint(_) = fallback {
            let resolved = with_provider_defaults(&fallback.resolve(&primary));
            chain.push((resolved, "model.fallbacks.api_key"));
        }
    }
    for (model, field) in chain.iter().filter(|(m, _)| m.provider != "replay") {
        ApiKeys::new(&model.api_key, &model.api_keys, field).check_all()?;
    }
    Ok(())
}

/// What the model server said to `GET {base_url}/models`, which OpenAI-compatible servers and
/// Anthropic both serve; an error when it cannot be used (no key, unreachable, key refused).
pub async fn probe(config: &ModelConfig) -> Result<String, ProviderError> {
    let config = with_provider_defaults(config);
    if config.provider == "replay" {
        // Opening the recording is what the provider needs; building it does that.
        super::from_config(&config)?;
        return Ok(format!("answers from the recording {}", config.replay_file));
    }
    let key = ApiKeys::new(&config.api_key, &config.api_keys, "model.api_key").current()?;
    let (client, _) = http::client(&config)?;
    let url = format!("{}/models", config.base_url.trim_end_matches('/'));
    let request = client.get(&url).timeout(PROBE_TIMEOUT);
    let request = match config.provider.as_str() {
        "anthropic" => request
            .header("x-api-key", &key.secret)
            .header("anthropic-version", super::anthropic::ANTHROPIC_VERSION),
        _ => request.bearer_auth(&key.secret),
    };
    let response = request
        .send()
        .await
        .map_err(|e| transport_error(e, &url, PROBE_TIMEOUT))?;
    let status = response.status();
    if matches!(status.as_u16(), 401 | 403) {
        return Err(ProviderError::Http {
            status: status.as_u16(),
            message: "the server refused the API key; check [model] api_key and its variable"
                .into(),
            retry_after: None,
        });
    }
    Ok(format!(
        "{} answered GET /models with HTTP {status}",
        config.base_url
    ))
}
