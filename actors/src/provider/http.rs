//! What every HTTP provider shares: the client's timeouts, reading an error answer (OpenAI's
//! and Anthropic's shapes both carry `error.message`), and naming transport failures.

use super::keys::ApiKeys;
use super::{wait_hint, ProviderError};
use crate::config::ModelConfig;
use std::time::Duration;

/// At most this much of a server's error body is kept in an error message.
const MAX_ERROR_BODY: usize = 2048;

/// A client whose reads time out after the stream's idle timeout: a silent stream is cut.
pub(crate) fn client(config: &ModelConfig) -> Result<(reqwest::Client, Duration), ProviderError> {
    let idle_timeout = Duration::from_secs(config.stream_idle_timeout_secs.max(1));
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(config.connect_timeout_secs.max(1)))
        .read_timeout(idle_timeout)
        .build()
        .map_err(|e| ProviderError::Config(format!("building the HTTP client: {e}")))?;
    Ok((http, idle_timeout))
}

/// Whether `base_url` names a server on this machine (`localhost`, `127.0.0.0/8`, `::1`): a
/// model served there (llama.cpp, Ollama, vLLM) runs on the user's own hardware.
pub(crate) fn is_loopback(base_url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base_url) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.to_ascii_lowercase();
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// The error an unsuccessful answer stands for: its status, the server's message, how long it
/// asked to wait, or that the request outgrew the model's context window.
pub(crate) async fn error_from(response: reqwest::Response) -> ProviderError {
    let status = response.status().as_u16();
    let retry_after = wait_hint::from_headers(response.headers());
    let body = response.text().await.unwrap_or_default();
    if let Some(overflow) = super::overflow::from_answer(status, &body) {
        return ProviderError::ContextOverflow(overflow);
    }
    let message = server_words(&body).unwrap_or_else(|| truncate(body.trim(), MAX_ERROR_BODY));
    ProviderError::Http {
        status,
        message,
        retry_after,
    }
}

/// Sends `request` with the key in use (put on it by `authorize`), and returns the response
/// when it is a success. A failure is named without the key: a 429 moves later requests to the
/// next key, and a server that echoes the key in its error body has it masked.
pub(crate) async fn send(
    request: reqwest::RequestBuilder,
    keys: &ApiKeys,
    authorize: impl FnOnce(reqwest::RequestBuilder, &str) -> reqwest::RequestBuilder,
    url: &str,
    idle_timeout: Duration,
) -> Result<reqwest::Response, ProviderError> {
    let key = keys.current()?;
    let request = if key.secret.is_empty() {
        request
    } else {
        authorize(request, &key.secret)
    };
    let response = request
        .send()
        .await
        .map_err(|e| transport_error(e, url, idle_timeout))?;
    if response.status().is_success() {
        return Ok(response);
    }
    let mut error = error_from(response).await;
    if let ProviderError::Http {
        status, message, ..
    } = &mut error
    {
        if *status == 429 {
            keys.rotate_after(key.index);
        }
        if !key.secret.is_empty() && message.contains(&key.secret) {
            *message = message.replace(&key.secret, "[key]");
        }
    }
    Err(error)
}

/// A request that got no answer: a timeout is an idle stream, anything else a connection
/// failure with its causes. The URL is named once, without any credentials it may hold.
pub(crate) fn transport_error(
    e: reqwest::Error,
    url: &str,
    idle_timeout: Duration,
) -> ProviderError {
    if e.is_timeout() {
        ProviderError::IdleTimeout(idle_timeout)
    } else {
        let cause = error_chain(&e.without_url());
        ProviderError::Connect(format!("{}: {cause}", safe_url(url)))
    }
}

/// `url` without user information or query, which may carry credentials.
fn safe_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            u.set_query(None);
            // Setting these only fails for URLs that cannot have them.
            u.set_username("").ok();
            u.set_password(None).ok();
            u.to_string()
        }
        Err(_) => "the configured URL".to_owned(),
    }
}

/// The error and its causes, which reqwest keeps apart ("error sending request" alone says
/// little).
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

pub(crate) use crate::text::truncate;

/// What the server said in an error body: `error.message` (OpenAI's, Anthropic's, llama.cpp's
/// shapes), `error` itself when it is a string (Ollama), or a top-level `message` (vLLM).
fn server_words(body: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    let said = match value.get("error") {
        Some(serde_json::Value::String(words)) => Some(words.as_str()),
        Some(error) => error.get("message").and_then(serde_json::Value::as_str),
        None => value.get("message").and_then(serde_json::Value::as_str),
    };
    said.filter(|s| !s.is_empty()).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_servers_are_recognised_and_remote_ones_are_not() {
        for local in [
            "http://127.0.0.1:8080/v1",
            "http://localhost:11434/v1",
            "http://LOCALHOST/v1",
            "http://[::1]:8000/v1",
            "http://127.3.2.1/v1",
        ] {
            assert!(is_loopback(local), "{local}");
        }
        for remote in [
            "https://api.openai.com/v1",
            "http://localhost.example.com/v1",
            "http://10.0.0.5:8080/v1",
            "http://0.0.0.0:8080/v1",
            "not a url",
        ] {
            assert!(!is_loopback(remote), "{remote}");
        }
    }
}
