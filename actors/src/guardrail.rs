//! Guardrails: checks a host application (or `[guardrails]` in the config) puts around every
//! model call. A before-guardrail sees the request and may pass it, transform it or block it; an
//! after-guardrail sees the answer and may pass or block it. A block is a tripwire: the run
//! stops with status `blocked` and a `GuardrailTripwire` event. Blocked before, the model is
//! never called; blocked after, the answer stays out of the history. It is not resumable.

use crate::message::Message;
use crate::provider::{AssistantResponse, ChatRequest};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What a before-guardrail decided.
pub enum Before {
    Pass,
    /// Send this request instead.
    Transform(ChatRequest),
    Block(String),
}

/// What an after-guardrail decided.
pub enum After {
    Pass,
    Block(String),
}

/// A check around model calls.
pub trait Guardrail: Send + Sync + 'static {
    /// Its name, for the tripwire event.
    fn name(&self) -> &str;

    /// Sees each request before it is sent.
    fn before(&self, _request: &ChatRequest) -> Before {
        Before::Pass
    }

    /// Sees each answer before it enters the history.
    fn after(&self, _response: &AssistantResponse) -> After {
        After::Pass
    }
}

/// `[guardrails]`: patterns that trip the wire from the config.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GuardrailConfig {
    /// Regular expressions: a user message matching one is never sent to the model.
    pub block_input: Vec<String>,
    /// Regular expressions: an answer matching one is kept out of the history.
    pub block_output: Vec<String>,
}

/// The guardrail `[guardrails]` describes.
pub(crate) struct Patterns {
    input: Vec<regex::Regex>,
    output: Vec<regex::Regex>,
}

impl Patterns {
    /// The patterns of `config`, or `None` when it has none; a pattern that does not compile
    /// is an error naming it.
    pub(crate) fn from_config(
        config: &GuardrailConfig,
    ) -> Result<Option<Arc<dyn Guardrail>>, String> {
        if config.block_input.is_empty() && config.block_output.is_empty() {
            return Ok(None);
        }
        let compile = |key: &str, patterns: &[String]| {
            patterns
                .iter()
                .map(|p| {
                    regex::Regex::new(p).map_err(|e| {
                        format!("guardrails.{key}: '{p}' is not a regular expression: {e}")
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Some(Arc::new(Patterns {
            input: compile("block_input", &config.block_input)?,
            output: compile("block_output", &config.block_output)?,
        })))
    }
}

impl Guardrail for Patterns {
    fn name(&self) -> &str {
        "[guardrails]"
    }

    fn before(&self, request: &ChatRequest) -> Before {
        // The latest user message is the new input; earlier ones already passed.
        let latest = request
            .messages
            .iter()
            .rev()
            .find_map(|m| match m.as_ref() {
                Message::User { content } => Some(content),
                _ => None,
            });
        match latest.and_then(|text| self.input.iter().find(|p| p.is_match(text))) {
            Some(p) => Before::Block(format!("the input matches a blocked pattern ({p})")),
            None => Before::Pass,
        }
    }

    fn after(&self, response: &AssistantResponse) -> After {
        match self.output.iter().find(|p| p.is_match(&response.text)) {
            Some(p) => After::Block(format!("the answer matches a blocked pattern ({p})")),
            None => After::Pass,
        }
    }
}
