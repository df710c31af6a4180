//! Settings checked as they are read, so a bad value is refused at load with its key and line
//! (not met later, at every run): URLs that a model server can be reached at, known providers,
//! limits above zero.

use serde::{Deserialize, Deserializer};

/// The providers `[model] provider` may name.
pub(crate) const PROVIDERS: &[&str] = &["openai", "openai-responses", "anthropic", "replay"];

/// A model provider Ryvos knows.
pub(super) fn provider<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let name = String::deserialize(d)?;
    if PROVIDERS.contains(&name.as_str()) {
        return Ok(name);
    }
    Err(serde::de::Error::custom(format!(
        "unknown provider '{name}': use \"openai\" (any OpenAI-compatible endpoint), \
         \"openai-responses\" (OpenAI's Responses API), \"anthropic\" (the Messages API) or \
         \"replay\" (answers from a recording)"
    )))
}

/// An http(s) URL with a host.
pub(super) fn http_url<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let text = String::deserialize(d)?;
    check_http_url(&text).map_err(serde::de::Error::custom)?;
    Ok(text)
}

/// Why `text` is not an http(s) URL with a host, if it is not.
pub(crate) fn check_http_url(text: &str) -> Result<(), String> {
    let url = reqwest::Url::parse(text).map_err(|e| {
        format!("'{text}' is not a URL ({e}); write it as https://host[:port]/path")
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "'{text}' is a {} URL; a server is reached over http:// or https://",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("'{text}' names no host"));
    }
    Ok(())
}

/// A count or a number of seconds that must be above zero.
pub(super) fn positive<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + PartialEq + Default + std::fmt::Display,
{
    let value = T::deserialize(d)?;
    if value == T::default() {
        return Err(serde::de::Error::custom(
            "must be at least 1 (0 would stop every run before it starts)",
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_urls_with_a_host_pass() {
        assert!(check_http_url("https://api.openai.com/v1").is_ok());
        assert!(check_http_url("http://127.0.0.1:8080/v1").is_ok());
        assert!(check_http_url("not a url")
            .unwrap_err()
            .contains("not a URL"));
        assert!(check_http_url("ftp://example.com")
            .unwrap_err()
            .contains("ftp URL"));
    }
}
