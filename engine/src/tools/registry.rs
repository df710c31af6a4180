//! The tools a runtime offers, each with its compiled argument schema.

use super::Tool;
use crate::provider::ToolSpec;
use arc_swap::ArcSwap;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// A tool with its spec and its compiled schema: compiled once, when it joins.
struct Registered {
    tool: Arc<dyn Tool>,
    spec: ToolSpec,
    validator: jsonschema::Validator,
}

impl Registered {
    fn compile(tool: Arc<dyn Tool>) -> Result<Arc<Self>, RegistryError> {
        let name = tool.name().to_owned();
        let schema = tool.parameters();
        let validator =
            jsonschema::validator_for(&schema).map_err(|e| RegistryError::InvalidSchema {
                name: name.clone(),
                cause: e.to_string(),
            })?;
        let spec = ToolSpec {
            name,
            description: tool.description().to_owned(),
            parameters: schema,
        };
        Ok(Arc::new(Self {
            tool,
            spec,
            validator,
        }))
    }
}

/// The tools at one moment: what a model call is offered and its calls are checked against.
#[derive(Default)]
struct Snapshot {
    tools: HashMap<String, Arc<Registered>>,
    specs: Arc<Vec<ToolSpec>>,
    /// What the specs weigh in a request, counted once, when first asked.
    specs_tokens: std::sync::OnceLock<u64>,
}

/// Tools by name, with their schemas compiled once.
///
/// The built-in (and host) tools are fixed at start; groups of tools that come and go (an MCP
/// server's) are replaced whole with [`ToolRegistry::replace_group`]. Readers take the current
/// snapshot without a lock; a change is seen by the next model call.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    current: Arc<ArcSwap<Snapshot>>,
    /// The fixed tools and every group, to build the next snapshot from (writers only).
    sources: Arc<Mutex<Sources>>,
}

#[derive(Default)]
struct Sources {
    fixed: Vec<Arc<Registered>>,
    groups: BTreeMap<String, Vec<Arc<Registered>>>,
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

impl Snapshot {
    fn of<'a>(tools: impl IntoIterator<Item = &'a Arc<Registered>>) -> Self {
        let ordered: Vec<&Arc<Registered>> = tools.into_iter().collect();
        // The specs keep the tools' order: the same tools make the same request.
        let specs = ordered.iter().map(|r| r.spec.clone()).collect();
        let tools = (ordered.into_iter())
            .map(|r| (r.spec.name.clone(), r.clone()))
            .collect();
        Self {
            tools,
            specs: Arc::new(specs),
            specs_tokens: std::sync::OnceLock::new(),
        }
    }
}

impl ToolRegistry {
    /// A registry of `tools`.
    pub fn new(tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Result<Self, RegistryError> {
        let mut fixed: Vec<Arc<Registered>> = Vec::new();
        for tool in tools {
            let registered = Registered::compile(tool)?;
            if fixed.iter().any(|r| r.spec.name == registered.spec.name) {
                return Err(RegistryError::Duplicate(registered.spec.name.clone()));
            }
            fixed.push(registered);
        }
        Ok(Self {
            current: Arc::new(ArcSwap::from_pointee(Snapshot::of(&fixed))),
            sources: Arc::new(Mutex::new(Sources {
                fixed,
                groups: BTreeMap::new(),
            })),
        })
    }

    /// Makes `tools` the whole of `group` (empty: the group is gone). Each tool joins on its
    /// own: one whose schema does not compile, or whose name another tool has, is left out
    /// and returned with why; the others are offered.
    pub fn replace_group(&self, group: &str, tools: Vec<Arc<dyn Tool>>) -> Vec<RegistryError> {
        let mut sources = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        sources.groups.remove(group);
        let mut taken: std::collections::HashSet<String> = (sources.fixed.iter())
            .chain(sources.groups.values().flatten())
            .map(|r| r.spec.name.clone())
            .collect();
        let mut joined = Vec::new();
        let mut left_out = Vec::new();
        for tool in tools {
            match Registered::compile(tool) {
                Ok(r) if taken.insert(r.spec.name.clone()) => joined.push(r),
                Ok(r) => left_out.push(RegistryError::Duplicate(r.spec.name.clone())),
                Err(e) => left_out.push(e),
            }
        }
        sources.groups.insert(group.to_owned(), joined);
        let all = sources
            .fixed
            .iter()
            .chain(sources.groups.values().flatten());
        self.current.store(Arc::new(Snapshot::of(all)));
        left_out
    }

    /// The names of `group`'s tools, sorted.
    pub fn group_names(&self, group: &str) -> Vec<String> {
        let sources = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        let mut names: Vec<String> = (sources.groups.get(group).into_iter().flatten())
            .map(|r| r.spec.name.clone())
            .collect();
        names.sort_unstable();
        names
    }

    /// The tools as the model is told about them.
    pub fn specs(&self) -> Arc<Vec<ToolSpec>> {
        self.current.load().specs.clone()
    }

    /// The tokens the specs take in every request (their JSON, counted once, where blocking is
    /// fine: see [`crate::tokens::blocking`]): part of what a request is billed when the server
    /// reports no usage.
    pub fn specs_tokens(&self) -> u64 {
        let snapshot = self.current.load();
        *snapshot.specs_tokens.get_or_init(|| {
            let json = serde_json::to_string(&*snapshot.specs).unwrap_or_default();
            crate::tokens::blocking(|| crate::tokens::count_text(&json)).into()
        })
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.current.load().tools.get(name).map(|r| r.tool.clone())
    }

    /// The names of every tool, sorted, for error messages.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.current.load().tools.keys().cloned().collect();
        names.sort_unstable();
        names
    }

    /// Parses and validates `arguments` for the tool `name` (which must exist).
    pub fn validate(
        &self,
        name: &str,
        arguments: &str,
    ) -> Result<serde_json::Value, ValidationError> {
        let snapshot = self.current.load();
        let Some(registered) = snapshot.tools.get(name) else {
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
