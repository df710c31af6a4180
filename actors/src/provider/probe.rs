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
    let listed = match config.provider.as_str() {
        // Anthropic lists dated ids only (`claude-haiku-4-5-20251001`), a page at a time, and
        // serves their aliases too: its list cannot tell.
        "anthropic" => None,
        _ => response.json::<serde_json::Value>().await.ok(),
    };
    if let Some(why) = listed.as_ref().and_then(|l| not_listed(l, &config.model)) {
        return Err(ProviderError::Config(why));
    }
    Ok(format!(
        "{} answered GET /models with HTTP {status}",
        config.base_url
    ))
}

/// Why `model` would not be served, when the server's list of models (`{"data": [{"id"}]}`)
/// names others only. Where the list cannot tell, nothing: a list that cannot be read, or a
/// server that serves its one model under any name (llama.cpp's), or a name the list holds
/// with a tag (Ollama's `llama3:latest` for `llama3`).
fn not_listed(listed: &serde_json::Value, model: &str) -> Option<String> {
    let entries = listed["data"].as_array()?;
    // A page of a longer list, or a server that serves any name.
    if listed["has_more"] == true || entries.iter().any(|m| m["owned_by"] == "llamacpp") {
        return None;
    }
    let ids: Vec<&str> = entries.iter().filter_map(|m| m["id"].as_str()).collect();
    let tagged = format!("{model}:");
    if ids.is_empty() || ids.iter().any(|id| *id == model || id.starts_with(&tagged)) {
        return None;
    }
    let shown: Vec<&str> = ids.iter().take(10).copied().collect();
    let more = match ids.len() > shown.len() {
        true => format!(" and {} more", ids.len() - shown.len()),
        false => String::new(),
    };
    Some(format!(
        "the server does not list the model {model}: a run would be refused (HTTP 404). It \
         lists {}{more}; set [model] model (or --model) to one of them",
        shown.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::not_listed;
    use serde_json::json;

    #[test]
    fn a_model_is_not_listed_only_where_the_list_can_tell() {
        let openai = json!({"data": [{"id": "gpt-5", "owned_by": "openai"}]});
        assert!(not_listed(&openai, "gpt-5").is_none());
        assert!(not_listed(&openai, "gpt-6")
            .unwrap()
            .contains("lists gpt-5"));
        // Ollama lists a tag; llama.cpp serves its model under any name.
        let ollama = json!({"data": [{"id": "llama3:latest", "owned_by": "library"}]});
        assert!(not_listed(&ollama, "llama3").is_none());
        let llama = json!({"data": [{"id": "/models/gemma.gguf", "owned_by": "llamacpp"}]});
        assert!(not_listed(&llama, "anything").is_none());
        assert!(not_listed(&json!({"unexpected": true}), "m").is_none());
    }
}
