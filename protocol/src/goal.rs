//! Goals: what a goal-driven run must achieve (a description, weighted success criteria) and
//! within what (constraints), in their wire form (`KIND:VALUE[@WEIGHT]`), and what a
//! criterion came to.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a goal-driven run must achieve.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Goal {
    pub description: String,
    /// Weighted checks of the answer or the workspace; with none, the model judges the
    /// description itself.
    #[serde(default)]
    pub criteria: Vec<Criterion>,
    #[serde(default, skip_serializing_if = "Constraints::is_empty")]
    pub constraints: Constraints,
}

/// One success criterion and its weight in the score.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Criterion {
    pub kind: CriterionKind,
    /// For `contains`/`equals`/`regex`: the text or pattern; for `command`: a shell command run
    /// in the workspace (exit code 0 means met); for `llm`: what the judge model is asked.
    pub value: String,
    #[serde(default = "one")]
    pub weight: f64,
    /// Who wrote it. A `command` the model wrote (a Director plan's) passes the security gate
    /// like a `bash` call; one the user gave runs without approval. Both run in the sandbox.
    /// Unknown means the model: only the embedding API and the socket mark what users give.
    #[serde(default)]
    pub origin: CriterionOrigin,
}

fn one() -> f64 {
    1.0
}

/// Who wrote a criterion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CriterionOrigin {
    /// The person (or host application) who started the run.
    User,
    /// The model, e.g. in a Director plan: its commands are tool calls in all but name.
    #[default]
    Model,
}

/// How a criterion is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CriterionKind {
    /// The final answer contains the value.
    Contains,
    /// The final answer, trimmed, is the value.
    Equals,
    /// The final answer matches the regular expression.
    Regex,
    /// The shell command exits 0 in the workspace.
    Command,
    /// The judge model says the answer meets it.
    Llm,
}

impl CriterionKind {
    /// Checked without a model call.
    pub fn is_deterministic(self) -> bool {
        self != CriterionKind::Llm
    }

    fn name(self) -> &'static str {
        match self {
            CriterionKind::Contains => "contains",
            CriterionKind::Equals => "equals",
            CriterionKind::Regex => "regex",
            CriterionKind::Command => "command",
            CriterionKind::Llm => "llm",
        }
    }
}

/// What the run must stay within; said to the model in the focus layer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Constraints {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_cents: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<String>,
}

impl Constraints {
    fn is_empty(&self) -> bool {
        *self == Constraints::default()
    }
}

/// Why a criterion given as text could not be read.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum CriterionError {
    #[error("criterion '{0}' has no kind: write KIND:VALUE[@WEIGHT], KIND one of contains, equals, regex, command, llm")]
    NoKind(String),
    #[error("criterion '{0}': unknown kind '{1}'; use contains, equals, regex, command or llm")]
    UnknownKind(String, String),
    #[error("criterion '{0}' has an empty value")]
    Empty(String),
    #[error("criterion '{0}': the weight must be a positive number")]
    Weight(String),
    #[error("criterion '{0}': the regular expression does not compile: {1}")]
    Regex(String, String),
    #[error("the goal has no description: say what the run must achieve")]
    NoDescription,
}

impl std::str::FromStr for Criterion {
    type Err = CriterionError;

    /// `KIND:VALUE[@WEIGHT]`: a trailing `@` followed by a number is the weight (`@` elsewhere
    /// belongs to the value).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (kind, rest) = text
            .split_once(':')
            .ok_or_else(|| CriterionError::NoKind(text.to_owned()))?;
        let kind = match kind.trim() {
            "contains" => CriterionKind::Contains,
            "equals" => CriterionKind::Equals,
            "regex" => CriterionKind::Regex,
            "command" => CriterionKind::Command,
            "llm" => CriterionKind::Llm,
            other => {
                return Err(CriterionError::UnknownKind(
                    text.to_owned(),
                    other.to_owned(),
                ))
            }
        };
        let (value, weight) = match rest.rsplit_once('@') {
            Some((value, w)) if w.trim().parse::<f64>().is_ok() => {
                let weight: f64 = w.trim().parse().unwrap_or(1.0);
                if !(weight.is_finite() && weight > 0.0) {
                    return Err(CriterionError::Weight(text.to_owned()));
                }
                (value, weight)
            }
            _ => (rest, 1.0),
        };
        if value.is_empty() {
            return Err(CriterionError::Empty(text.to_owned()));
        }
        let criterion = Criterion {
            kind,
            value: value.to_owned(),
            weight,
            origin: CriterionOrigin::Model,
        };
        criterion.validate()?;
        Ok(criterion)
    }
}

impl Criterion {
    /// Refuses what could never be checked (a regex that does not compile, a bad weight).
    pub fn validate(&self) -> Result<(), CriterionError> {
        let text = self.to_string();
        if !(self.weight.is_finite() && self.weight > 0.0) {
            return Err(CriterionError::Weight(text));
        }
        if self.value.is_empty() {
            return Err(CriterionError::Empty(text));
        }
        if self.kind == CriterionKind::Regex {
            regex::Regex::new(&self.value)
                .map_err(|e| CriterionError::Regex(text, e.to_string()))?;
        }
        Ok(())
    }
}

impl std::fmt::Display for Criterion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.kind.name(), self.value)?;
        if self.weight != 1.0 {
            write!(f, "@{}", self.weight)?;
        }
        Ok(())
    }
}

impl Goal {
    /// The goal as the user gave it: its criteria are the user's own (see [`CriterionOrigin`]).
    pub fn from_user(mut self) -> Self {
        for c in &mut self.criteria {
            c.origin = CriterionOrigin::User;
        }
        self
    }

    /// Refuses a goal that could never be judged: no description, or a criterion that could
    /// never be checked.
    pub fn validate(&self) -> Result<(), CriterionError> {
        if self.description.trim().is_empty() {
            return Err(CriterionError::NoDescription);
        }
        self.criteria.iter().try_for_each(Criterion::validate)
    }
}

/// Whether one criterion is met, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CriterionResult {
    /// The criterion, as `KIND:VALUE[@WEIGHT]`.
    pub criterion: String,
    pub met: bool,
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn criteria_parse_with_and_without_weights() {
        let c: Criterion = "contains:42".parse().unwrap();
        assert_eq!(
            (c.kind, c.value.as_str(), c.weight),
            (CriterionKind::Contains, "42", 1.0)
        );
        let c: Criterion = "command:cargo test -q@2.5".parse().unwrap();
        assert_eq!((c.value.as_str(), c.weight), ("cargo test -q", 2.5));
        // An @ that is not followed by a number belongs to the value.
        let c: Criterion = "contains:me@example.com".parse().unwrap();
        assert_eq!((c.value.as_str(), c.weight), ("me@example.com", 1.0));
        assert_eq!(c.to_string(), "contains:me@example.com");
    }

    #[test]
    fn bad_criteria_say_what_is_wrong() {
        assert!(matches!(
            "42".parse::<Criterion>(),
            Err(CriterionError::NoKind(_))
        ));
        assert!(matches!(
            "has:42".parse::<Criterion>(),
            Err(CriterionError::UnknownKind(..))
        ));
        assert!(matches!(
            "contains:".parse::<Criterion>(),
            Err(CriterionError::Empty(_))
        ));
        assert!(matches!(
            "contains:x@0".parse::<Criterion>(),
            Err(CriterionError::Weight(_))
        ));
        assert!(matches!(
            "regex:(".parse::<Criterion>(),
            Err(CriterionError::Regex(..))
        ));
    }
}
