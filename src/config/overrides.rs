//! Settings given on the command line (`-c KEY=VALUE`, `--model`, `--max-turns`): laid over
//! the config file's and checked exactly as the file is, so a bad one is refused by its flag.
//!
//! `KEY` is written as in the file (`agent.max_turns`, `budget.pricing_overrides."m".input_per_1m`)
//! and `VALUE` as a TOML value (`5`, `true`, `["read"]`, `"text"`); a value that is not TOML is
//! taken as a string, so `-c model.model=gpt-4o` needs no quotes.

use std::str::FromStr;

/// One setting from the command line, as a TOML table holding just that key.
#[derive(Clone, Debug, PartialEq)]
pub struct Override {
    /// As the user wrote it, for messages.
    pub given: String,
    table: toml::Table,
}

/// A `-c` that is not `KEY=VALUE`.
#[derive(Debug, thiserror::Error)]
#[error("-c {given}: {why}; write it as KEY=VALUE, e.g. -c agent.max_turns=10")]
pub struct OverrideSyntaxError {
    given: String,
    why: String,
}

impl Override {
    /// `key` set to `value`.
    pub fn new(key: &str, value: toml::Value) -> Result<Self, OverrideSyntaxError> {
        let given = format!("{key}={value}");
        let line = format!("{key} = {value}");
        let table = toml::from_str(&line).map_err(|e| OverrideSyntaxError {
            why: format!("`{key}` is not a config key ({})", e.message()),
            given: given.clone(),
        })?;
        Ok(Self { given, table })
    }

    /// Lays this setting over `table`, the settings read so far.
    pub(super) fn apply_to(&self, table: &mut toml::Table) {
        merge(table, &self.table);
    }

    /// The key it sets, dotted as in `-c` (`agent.max_turns`).
    pub fn key(&self) -> String {
        let mut parts = Vec::new();
        let mut table = &self.table;
        while let Some((name, value)) = table.iter().next() {
            parts.push(name.as_str());
            match value {
                toml::Value::Table(inner) => table = inner,
                _ => break,
            }
        }
        parts.join(".")
    }

    /// This setting alone, as a table.
    #[cfg(test)]
    fn alone(&self) -> toml::Table {
        self.table.clone()
    }
}

impl FromStr for Override {
    type Err = OverrideSyntaxError;

    fn from_str(given: &str) -> Result<Self, Self::Err> {
        let Some((key, value)) = given.split_once('=') else {
            return Err(OverrideSyntaxError {
                given: given.to_owned(),
                why: "there is no `=`".into(),
            });
        };
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() {
            return Err(OverrideSyntaxError {
                given: given.to_owned(),
                why: "the key is empty".into(),
            });
        }
        let value = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_owned()));
        let mut parsed = Self::new(key, value)?;
        parsed.given = given.to_owned();
        Ok(parsed)
    }
}

/// Sets every key of `over` in `into`, descending into tables both have.
fn merge(into: &mut toml::Table, over: &toml::Table) {
    for (key, value) in over {
        match (into.get_mut(key), value) {
            (Some(toml::Value::Table(inner)), toml::Value::Table(over)) => merge(inner, over),
            _ => {
                into.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn values_are_toml_else_strings() {
        let turns: Override = "agent.max_turns=5".parse().unwrap();
        assert_eq!(turns.alone(), table("[agent]\nmax_turns = 5"));
        let model: Override = "model.model=gpt-4o".parse().unwrap();
        assert_eq!(model.alone(), table("[model]\nmodel = \"gpt-4o\""));
        let list: Override = "security.auto_approve=[\"read\"]".parse().unwrap();
        assert_eq!(list.alone(), table("[security]\nauto_approve = [\"read\"]"));
        let quoted: Override = "budget.pricing_overrides.\"a-b\".input_per_1m=3"
            .parse()
            .unwrap();
        assert_eq!(
            quoted.alone(),
            table("[budget.pricing_overrides.\"a-b\"]\ninput_per_1m = 3")
        );
    }

    #[test]
    fn a_setting_keeps_its_neighbours() {
        let mut read = table("[agent]\nmax_turns = 3\nmin_tail = 4\n");
        "agent.max_turns=9"
            .parse::<Override>()
            .unwrap()
            .apply_to(&mut read);
        assert_eq!(read, table("[agent]\nmax_turns = 9\nmin_tail = 4\n"));
    }

    #[test]
    fn malformed_settings_say_how_to_write_them() {
        for bad in ["max_turns", "=3", "a b=1"] {
            let err = bad.parse::<Override>().unwrap_err().to_string();
            assert!(err.contains("KEY=VALUE"), "{bad}: {err}");
        }
    }
}
