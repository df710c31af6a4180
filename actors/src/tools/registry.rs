//! The tools a runtime offers, each with its compiled argument schema.

use super::Tool;
use crate::provider::ToolSpec;
use arc_swap::ArcSwap;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// A tool with its spec and its schema, compiled once.
struct Registered {
    tool: Arc<dyn Tool>,
    spec: ToolSpec,
    /// Compiled at the tool's first call if it is a fixed one, or as it joins if it is a
    /// group's (so that a bad schema from an MCP server is left out at once). Compiling pulls
    /// in the whole JSON Schema machinery, which a daemon that runs nothing should not hold.
    validator: OnceLock<Result<jsonschema::Validator, String>>,
}

impl Registered {
    /// The tool, its schema compiled when first needed.
    fn new(tool: Arc<dyn Tool>) -> Arc<Self> {
        let spec = ToolSpec {
            name: tool.name().to_owned(),
            description: tool.description().to_owned(),
            parameters: tool.parameters(),
        };
        Arc::new(Self {
            tool,
            spec,
            validator: OnceLock::new(),
        })
    }

    /// The tool, its schema compiled now.
    fn compiled(tool: Arc<dyn Tool>) -> Result<Arc<Self>, RegistryError> {
        let registered = Self::new(tool);
        registered.validator()?;
        Ok(registered)
    }

    fn validator(&self) -> Result<&jsonschema::Validator, RegistryError> {
        let compiled = self.validator.get_or_init(|| {
            jsonschema::validator_for(&self.spec.parameters).map_err(|e| e.to_string())
        });
        compiled
            .as_ref()
            .map_err(|cause| RegistryError::InvalidSchema {
                name: self.spec.name.clone(),
                cause: cause.clone(),
            })
    }
}

/// The tools at one moment: what a model call is offered and its calls are checked against.
#[derive(Default)]
struct Snapshot {
    /// In the order they are offered.
    ordered: Vec<Arc<Registered>>,
    tools: HashMap<String, Arc<Registered>>,
    specs: Arc<Vec<ToolSpec>>,
    /// What the specs weigh in a request, counted once, when first asked.
    specs_tokens: OnceLock<u64>,
}

/// Tools by name, with their schemas compiled once.
///
/// The built-in (and host) tools are fixed at start; groups of tools that come and go (an MCP
/// server's) are replaced whole with [`ToolRegistry::replace_group`]. Readers take the current
/// snapshot without a lock; a change is seen by the next model call. An overlay
/// ([`ToolRegistry::overlay`]) offers its base's tools and groups of its own (one session's
/// MCP servers), and follows its base's changes.
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
    /// For an overlay: the registry whose tools come first.
    base: Option<ToolRegistry>,
    /// The overlays on this registry (weakly: a dropped one is forgotten), rebuilt when it
    /// changes.
    overlays: Vec<OverlayHandles>,
}

/// What a base keeps of an overlay: its snapshot and its sources.
type OverlayHandles = (Weak<ArcSwap<Snapshot>>, Weak<Mutex<Sources>>);

impl Sources {
    /// Its base's tools as they stand, then its own, into `current`.
    fn publish(&self, current: &ArcSwap<Snapshot>) {
        let base = self.base.as_ref().map(|b| b.current.load_full());
        let inherited = base.iter().flat_map(|b| b.ordered.iter());
        let own = self.fixed.iter().chain(self.groups.values().flatten());
        current.store(Arc::new(Snapshot::of(inherited.chain(own))));
    }
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
    /// `tools`, the first of each name (an overlay's base's) kept.
    fn of<'a>(tools: impl IntoIterator<Item = &'a Arc<Registered>>) -> Self {
        let mut named = HashSet::new();
        let ordered: Vec<Arc<Registered>> = (tools.into_iter())
            .filter(|r| named.insert(r.spec.name.clone()))
            .cloned()
            .collect();
        // The specs keep the tools' order: the same tools make the same request.
        let specs = ordered.iter().map(|r| r.spec.clone()).collect();
        let tools = (ordered.iter())
            .map(|r| (r.spec.name.clone(), r.clone()))
            .collect();
        Self {
            ordered,
            tools,
            specs: Arc::new(specs),
            specs_tokens: OnceLock::new(),
        }
    }
}

impl ToolRegistry {
    /// A registry of `tools`. Their schemas are compiled at each one's first call: one that
    /// does not compile refuses that call (`validation_error`), naming what is wrong with it.
    pub fn new(tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Result<Self, RegistryError> {
        let mut fixed: Vec<Arc<Registered>> = Vec::new();
        for tool in tools {
            let registered = Registered::new(tool);
            if fixed.iter().any(|r| r.spec.name == registered.spec.name) {
                return Err(RegistryError::Duplicate(registered.spec.name.clone()));
            }
            fixed.push(registered);
        }
        Ok(Self {
            current: Arc::new(ArcSwap::from_pointee(Snapshot::of(&fixed))),
            sources: Arc::new(Mutex::new(Sources {
                fixed,
                ..Sources::default()
            })),
        })
    }

    /// A registry offering this one's tools, as they change, and groups of its own after them
    /// (a group's tool named as one of this registry's is left out). It lives as long as its
    /// clones do.
    pub fn overlay(&self) -> ToolRegistry {
        let overlay = ToolRegistry {
            current: Arc::new(ArcSwap::from(self.current.load_full())),
            sources: Arc::new(Mutex::new(Sources {
                base: Some(self.clone()),
                ..Sources::default()
            })),
        };
        let mut sources = self.sources();
        sources
            .overlays
            .retain(|(current, _)| current.strong_count() > 0);
        let handles = (
            Arc::downgrade(&overlay.current),
            Arc::downgrade(&overlay.sources),
        );
        sources.overlays.push(handles);
        overlay
    }

    fn sources(&self) -> std::sync::MutexGuard<'_, Sources> {
        self.sources.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes `tools` the whole of `group` (empty: the group is gone). Each tool joins on its
    /// own: one whose schema does not compile, or whose name another tool has, is left out
    /// and returned with why; the others are offered.
    pub fn replace_group(&self, group: &str, tools: Vec<Arc<dyn Tool>>) -> Vec<RegistryError> {
        let mut sources = self.sources();
        sources.groups.remove(group);
        let inherited = sources.base.as_ref().map(|b| b.current.load_full());
        let mut taken: HashSet<String> = (inherited.iter().flat_map(|b| b.ordered.iter()))
            .chain(sources.fixed.iter())
            .chain(sources.groups.values().flatten())
            .map(|r| r.spec.name.clone())
            .collect();
        let mut joined = Vec::new();
        let mut left_out = Vec::new();
        for tool in tools {
            match Registered::compiled(tool) {
                Ok(r) if taken.insert(r.spec.name.clone()) => joined.push(r),
                Ok(r) => left_out.push(RegistryError::Duplicate(r.spec.name.clone())),
                Err(e) => left_out.push(e),
            }
        }
        sources.groups.insert(group.to_owned(), joined);
        sources.publish(&self.current);
        sources
            .overlays
            .retain(|(current, _)| current.strong_count() > 0);
        let overlays: Vec<_> = (sources.overlays.iter())
            .filter_map(|(current, sources)| Some((current.upgrade()?, sources.upgrade()?)))
            .collect();
        // Each overlay is rebuilt from this snapshot, once this registry's lock is let go: an
        // overlay's own change takes its lock, then reads this registry's snapshot, never its
        // lock.
        drop(sources);
        for (current, sources) in overlays {
            (sources.lock().unwrap_or_else(|p| p.into_inner())).publish(&current);
        }
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
        let validator = registered
            .validator()
            .map_err(|e| ValidationError(format!("{e}; the call was not run")))?;
        let problems: Vec<String> = validator
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{SafetyTier, ToolContext, ToolError};
    use serde_json::{json, Value};

    /// A tool with the given schema.
    struct Schema(&'static str, Value);

    #[async_trait::async_trait]
    impl Tool for Schema {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            "a schema under test"
        }
        fn parameters(&self) -> Value {
            self.1.clone()
        }
        fn tier(&self) -> SafetyTier {
            SafetyTier::T0
        }
        async fn execute(&self, _: Value, _: &ToolContext) -> Result<String, ToolError> {
            Ok(String::new())
        }
    }

    fn bad_schema() -> Value {
        json!({"type": "object", "properties": {"n": {"type": "no-such-type"}}})
    }

    #[test]
    fn every_built_in_schema_compiles() {
        let registry = ToolRegistry::new(crate::tools::builtin::all()).unwrap();
        for tool in registry.current.load().tools.values() {
            assert!(tool.validator().is_ok(), "{}", tool.spec.name);
        }
    }

    #[test]
    fn a_fixed_tool_with_a_bad_schema_has_its_calls_refused_naming_the_schema() {
        let registry = ToolRegistry::new([Arc::new(Schema("bad", bad_schema())) as _]).unwrap();
        let refused = registry.validate("bad", "{}").unwrap_err().to_string();
        assert!(refused.contains("invalid JSON Schema"), "{refused}");
        assert!(refused.contains("not run"), "{refused}");
    }

    #[test]
    fn a_groups_tool_with_a_bad_schema_is_left_out_as_it_joins() {
        let registry = ToolRegistry::default();
        let good = Arc::new(Schema("good", json!({"type": "object"}))) as Arc<dyn Tool>;
        let left_out = registry.replace_group(
            "mcp",
            vec![good, Arc::new(Schema("bad", bad_schema())) as _],
        );
        assert!(
            matches!(&left_out[..], [RegistryError::InvalidSchema { name, .. }] if name == "bad")
        );
        assert_eq!(registry.names(), ["good"]);
        assert!(registry.validate("good", "{}").is_ok());
    }

    #[test]
    fn an_overlay_offers_its_bases_tools_as_they_change_and_its_own_after_them() {
        let tool = |name: &'static str| Arc::new(Schema(name, json!({"type": "object"}))) as _;
        let base = ToolRegistry::new([tool("read")]).unwrap();
        let session = base.overlay();
        let other = base.overlay();
        assert!(
            session.replace_group("editor", vec![tool("lint"), tool("read")])[0]
                == RegistryError::Duplicate("read".into())
        );
        assert_eq!(session.names(), ["lint", "read"]);
        assert_eq!(other.names(), ["read"], "an overlay's tools are its own");
        assert_eq!(base.names(), ["read"]);
        // The base's servers come and go; its overlays follow.
        base.replace_group("mcp", vec![tool("search")]);
        assert_eq!(session.names(), ["lint", "read", "search"]);
        let offered: Vec<String> = session.specs().iter().map(|s| s.name.clone()).collect();
        assert_eq!(offered, ["read", "search", "lint"], "the base's first");
        // A name the base takes later is the base's: never offered twice.
        base.replace_group("mcp", vec![tool("lint")]);
        assert_eq!(session.specs().len(), 2);
        drop(other);
        base.replace_group("mcp", Vec::new());
        assert_eq!(
            base.sources().overlays.len(),
            1,
            "a dropped overlay is forgotten"
        );
        assert_eq!(session.names(), ["lint", "read"]);
    }
}
