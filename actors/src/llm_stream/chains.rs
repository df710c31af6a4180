//! The model chains runs ask: the configured one, and one per model a run chose instead
//! (`ryvos run --model M`): M on the configured provider's endpoint and keys, with the
//! configured fallbacks after it. Each is built once, on first use, and kept, so the runs of
//! one model share its connections.

use super::ModelChain;
use crate::config::ModelConfig;
use crate::provider::retry::RetryPolicy;
use crate::provider::ProviderError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// See the module documentation.
pub(crate) struct ModelChains {
    configured: Arc<ModelChain>,
    /// `[model]`, to build a chosen model's chain from; `None` when the runtime was given its
    /// provider, which asks one model only.
    config: Option<ModelConfig>,
    chosen: Mutex<HashMap<String, Arc<ModelChain>>>,
}

impl ModelChains {
    /// The chains of `[model]`, its own first.
    pub(crate) fn from_config(config: &ModelConfig) -> Result<Self, ProviderError> {
        let providers = crate::provider::chain_from_config(config)?;
        Ok(Self {
            configured: Arc::new(ModelChain::new(providers, RetryPolicy::from_config(config))),
            config: Some(config.clone()),
            chosen: Mutex::default(),
        })
    }

    /// Only `configured`: a runtime given its provider cannot ask another model.
    pub(crate) fn fixed(configured: Arc<ModelChain>) -> Self {
        Self {
            configured,
            config: None,
            chosen: Mutex::default(),
        }
    }

    /// The configured chain.
    pub(crate) fn configured(&self) -> &Arc<ModelChain> {
        &self.configured
    }

    /// The chain that asks `model` first (the configured one for `None`); why there is none.
    pub(crate) fn asking(&self, model: Option<&str>) -> Result<Arc<ModelChain>, String> {
        let model = match model {
            Some(model) if model != self.configured.model() => model,
            _ => return Ok(self.configured.clone()),
        };
        if model.trim().is_empty() {
            return Err("the run's model is empty: name a model, or leave it out".into());
        }
        let Some(config) = &self.config else {
            return Err(format!(
                "this runtime was given its model provider, which asks {} only; a run cannot \
                 choose {model}",
                self.configured.model()
            ));
        };
        let mut chosen = self.chosen.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(chain) = chosen.get(model) {
            return Ok(chain.clone());
        }
        let config = ModelConfig {
            model: model.to_owned(),
            ..config.clone()
        };
        let providers = crate::provider::chain_from_config(&config)
            .map_err(|e| format!("the run's model {model}: {e}"))?;
        let chain = Arc::new(ModelChain::new(
            providers,
            RetryPolicy::from_config(&config),
        ));
        chosen.insert(model.to_owned(), chain.clone());
        Ok(chain)
    }
}
