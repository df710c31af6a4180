//! The tools a runtime offers, each with its compiled argument schema.

use super::Tool;
use crate::provider::ToolSpec;
use std::collections::HashMap;
use std::sync::Arc;

struct Registered {
    tool: Arc<dyn Tool>,
    validator: jsonschema::Validator,
}

/// Tools by name, with their schemas compiled once.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Arc<HashMap<String, Registered>>,
    specs: Arc<Vec<ToolSpec>>,
    /// What the specs weigh in a request, counted once, when first asked.
    specs_tokens: Arc<std::sync::OnceLock<u64>>,
}

/// A tool that cannot be registered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RegistryError {
    #[error("the tool '{name}' has an invalid JSON Schema: {cause}")]
    InvalidSchema { name: String, cause: String },
    #[error("two tools are named '{0}'; tool names must be unique")]
    Duplicate(String),
}

/// Why a call's arguments were refused. Reported as `validation_error: …`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("validation_error: {0}")]
pub struct ValidationError(pub String);

impl ToolRegistry {
    /// A registry of `tools`.
    pub fn new(tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Result<Self, RegistryError> {
        let mut map = HashMap::new();
        let mut specs = Vec::new();
        for tool in tools {
            let name = tool.name().to_owned();
            let schema = tool.parameters();
            let validator =
                jsonschema::validator_for(&schema).map_err(|e| RegistryError::InvalidSchema {
                    name: name.clone(),
                    cause: e.to_string(),
                })?;
            specs.push(ToolSpec {
                name: name.clone(),
                description: tool.description().to_owned(),
                parameters: schema,
            });
            if map
                .insert(name.clone(), Registered { tool, validator })
                .is_some()
            {
                return Err(RegistryError::Duplicate(name));
            }
        }
        Ok(Self {
            tools: Arc::new(map),
            specs: Arc::new(specs),
            specs_tokens: Arc::default(),
        })
    }

    /// The tools as the model is told about them.
    pub fn specs(&self) -> Arc<Vec<ToolSpec>> {
        self.specs.clone()
    }

    /// The tokens the specs take in every request (their JSON, counted once): part of an
    /// estimate of what a request weighs when the server reports no usage.
    pub fn specs_tokens(&self) -> u64 {
        *self.specs_tokens.get_or_init(|| {
            let json = serde_json::to_string(&*self.specs).unwrap_or_default();
            crate::tokens::count_text(&json) as u64
        })
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name).map(|r| &r.tool)
    }

    /// The names of every tool, sorted, for error messages.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.tools.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// Parses and validates `arguments` for the tool `name` (which must exist).
    pub fn validate(
        &self,
        name: &str,
        arguments: &str,
    ) -> Result<serde_json::Value, ValidationError> {
        let Some(registered) = self.tools.get(name) else {
            return Err(ValidationError(format!("no tool named '{name}'")));
        };
        // A tool without parameters is often called with an empty string.
        let text = if arguments.trim().is_empty() {
            "{}"
        } else {
            arguments
        };
        let input: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            ValidationError(format!(
                "the arguments for '{name}' are not valid JSON ({e}); send one complete JSON \
                 object that matches the tool's schema"
            ))
        })?;
        let problems: Vec<String> = registered
            .validator
            .iter_errors(&input)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("at {at}: {e}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(input)
        } else {
            Err(ValidationError(format!(
                "the arguments for '{name}' do not match its schema: {}",
                problems.join("; ")
            )))
        }
    }
}
