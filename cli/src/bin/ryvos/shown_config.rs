//! `ryvos config`: the config this command would run with — the file, the `-c` settings and
//! the defaults together — as TOML, with secrets masked so that it can be pasted in a report.

use crate::exit::EXIT_RUN_FAILED;
use ryvos::config::Config;

/// What a masked secret shows.
const MASK: &str = "********";

/// Prints `config`; the exit code.
pub fn print(config: &Config) -> u8 {
    let mut value = match toml::Value::try_from(config) {
        Ok(value) => value,
        Err(e) => {
            eprintln!("ryvos: cannot show the config: {e}");
            return EXIT_RUN_FAILED;
        }
    };
    mask(&mut value, false);
    let from = config.source.as_ref().map_or_else(
        || "the built-in defaults".to_owned(),
        |p| p.display().to_string(),
    );
    let text = toml::to_string_pretty(&value).unwrap_or_else(|e| format!("# {e}\n"));
    crate::out::bytes(
        format!(
            "# The effective config: {from}, with -c settings and defaults; secrets masked.\n\
             # RYVOS_HOME = {}\n\n{text}",
            config.home.display()
        )
        .as_bytes(),
    );
    0
}

/// Masks every secret under `value`: the values of keys that name one (`api_key`, `headers`,
/// `…token`, …) unless they only refer to environment variables, and passwords in URLs.
fn mask(value: &mut toml::Value, secret: bool) {
    match value {
        toml::Value::String(text) if secret && !only_variables(text) => *text = MASK.into(),
        toml::Value::String(text) => {
            if let Some(masked) = without_password(text) {
                *text = masked;
            }
        }
        toml::Value::Array(items) => items.iter_mut().for_each(|v| mask(v, secret)),
        toml::Value::Table(table) => {
            for (key, inner) in table.iter_mut() {
                mask(inner, secret || names_a_secret(key));
            }
        }
        _ => {}
    }
}

/// Whether `key` names a secret: one of its words (`api_key`: `api`, `key`) is a secret's. Whole
/// words, so that `max_tokens_field` is not taken for a token.
fn names_a_secret(key: &str) -> bool {
    // An MCP server's env and args often carry its credentials, under any name.
    const SECRET_WORDS: &[&str] = &[
        "env",
        "args",
        "key",
        "keys",
        "token",
        "secret",
        "secrets",
        "password",
        "passwd",
        "headers",
        "authorization",
        "credentials",
    ];
    let key = key.to_ascii_lowercase();
    (key.split(['_', '-', '.'])).any(|word| SECRET_WORDS.contains(&word))
}

/// Whether `text` is made only of `${VAR}` references, which name secrets without holding them.
fn only_variables(text: &str) -> bool {
    let mut rest = text.trim();
    while let Some(after) = rest.strip_prefix("${") {
        match after.find('}') {
            Some(end) => rest = &after[end + 1..],
            None => return false,
        }
    }
    rest.is_empty() && !text.trim().is_empty()
}

/// `text` with the password of its URL masked, if it is a URL with one.
fn without_password(text: &str) -> Option<String> {
    let scheme_end = text.find("://")? + 3;
    let at = text[scheme_end..].find('@')? + scheme_end;
    let colon = text[scheme_end..at].find(':')? + scheme_end;
    Some(format!("{}{MASK}{}", &text[..=colon], &text[at..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_and_references_kept() {
        let mut value: toml::Value = toml::from_str(
            "[model]\napi_key = \"sk-live-123\"\napi_keys = [\"${A}\", \"raw\"]\n\
             max_tokens_field = \"max_completion_tokens\"\nauth_token = \"t-1\"\n\
             base_url = \"https://api.example.com/v1\"\n\
             [store]\nurl = \"postgres://ryvos:hunter2@db/ryvos\"\n\
             [mcp.x]\nheaders = { Authorization = \"Bearer ${T}\" }\n\
             args = [\"--api=sk-arg\"]\nenv = { GH_PAT = \"ghp_1\" }\n",
        )
        .unwrap();
        mask(&mut value, false);
        let text = value.to_string();
        for hidden in [
            "sk-live-123",
            "\"raw\"",
            "hunter2",
            "Bearer",
            "sk-arg",
            "ghp_1",
            "t-1",
        ] {
            assert!(!text.contains(hidden), "{hidden} shown in {text}");
        }
        assert!(text.contains("${A}") && text.contains("https://api.example.com/v1"));
        assert!(
            text.contains("max_completion_tokens"),
            "not a secret: {text}"
        );
        assert!(
            text.contains("postgres://ryvos:********@db/ryvos"),
            "{text}"
        );
    }
}
