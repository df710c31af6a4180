//! An HTTP hook: the step's JSON POSTed to an address on this machine's loopback, or to a
//! host its `allowed_domains` names; redirects are never followed (one could lead anywhere,
//! a cloud's metadata address included). A 2xx answer's JSON object is read as a command
//! hook's output; any other answer is a failure that changes nothing, as in Claude Code.

use super::reply::Ended;
use std::time::Duration;

/// An HTTP hook's address, checked.
#[derive(Clone, Debug)]
pub(crate) struct Address(reqwest::Url);

impl Address {
    /// `url`, if it is `http(s)://` to a loopback host or one `allowed` names.
    pub(crate) fn parse(url: &str, allowed: &[String]) -> Result<Self, String> {
        let parsed =
            reqwest::Url::parse(url).map_err(|e| format!("'{url}' is not an address: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("'{url}' is not an http:// or https:// address"));
        }
        let host = parsed
            .host_str()
            .unwrap_or_default()
            .trim_matches(['[', ']']);
        let loopback = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        let named = allowed.iter().any(|name| {
            let name = name.trim().to_lowercase();
            match name.strip_prefix("*.") {
                Some(parent) => host.ends_with(&format!(".{parent}")),
                None => host == name,
            }
        });
        if !loopback && !named {
            return Err(format!(
                "'{url}' is neither on this machine's loopback nor named by the hook's \
                 allowed_domains: add \"{host}\" to them to let the hook reach it"
            ));
        }
        Ok(Address(parsed))
    }

    pub(crate) fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

/// One client for every HTTP hook: it follows no redirect.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_default()
}

/// POSTs `body` to `address`, waiting at most `timeout`.
pub(crate) async fn post(
    client: &reqwest::Client,
    address: &Address,
    body: Vec<u8>,
    timeout: Duration,
) -> Ended {
    let sent = client
        .post(address.0.clone())
        .header("content-type", "application/json")
        .body(body)
        .timeout(timeout)
        .send()
        .await;
    let response = match sent {
        Ok(response) => response,
        Err(e) if e.is_timeout() => {
            return Ended::Failed(format!(
                "it did not answer within {}s (timeout_secs)",
                timeout.as_secs()
            ))
        }
        Err(e) => return Ended::Failed(format!("it could not be reached: {e}")),
    };
    let status = response.status();
    if !status.is_success() {
        return Ended::Failed(format!("it answered {status}"));
    }
    let text = match tokio::time::timeout(timeout, response.text()).await {
        Ok(Ok(text)) => text,
        Ok(Err(e)) => return Ended::Failed(format!("its answer could not be read: {e}")),
        Err(_) => return Ended::Failed("its answer did not arrive in time".into()),
    };
    let body = text.trim();
    if !body.is_empty() && !body.starts_with('{') {
        return Ended::Failed("its answer is not a JSON object".into());
    }
    Ended::Exited {
        code: Some(0),
        stdout: text,
        stderr: String::new(),
    }
}
