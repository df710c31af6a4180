//! An HTTP hook: the step's JSON POSTed to an address on this machine's loopback, or to a
//! host its `allowed_domains` names, which must not resolve to this machine (loopback,
//! link-local: a cloud's metadata address) and is connected to at the addresses checked;
//! redirects are never followed (one could lead anywhere), and no proxy of the environment is
//! used. A 2xx answer's JSON object is read as a command hook's output; any other answer is a
//! failure that changes nothing, as in Claude Code.

use super::reply::Ended;
use crate::sandbox::{is_this_machine, AllowedDomains};
use std::time::Duration;

/// The most of an answer read, in bytes.
const MAX_ANSWER_BYTES: usize = 256 * 1024;

/// An HTTP hook's address, checked.
#[derive(Clone, Debug)]
pub(crate) struct Address {
    url: reqwest::Url,
    /// On this machine's loopback (else a host `allowed_domains` names).
    loopback: bool,
}

impl Address {
    /// `url`, if it is `http(s)://` to a loopback host or one `allowed` names.
    pub(crate) fn parse(url: &str, allowed: &AllowedDomains) -> Result<Self, String> {
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
        let named = allowed.allows(host);
        if !loopback && !named {
            return Err(format!(
                "'{url}' is neither on this machine's loopback nor named by the hook's \
                 allowed_domains: add \"{host}\" to them to let the hook reach it"
            ));
        }
        Ok(Address {
            url: parsed,
            loopback,
        })
    }

    pub(crate) fn as_str(&self) -> &str {
        self.url.as_str()
    }

    /// The client to reach it with: `shared` for the loopback; for a named host, one that
    /// connects only to the addresses it resolves to now, once none is this machine's.
    async fn client(
        &self,
        shared: &reqwest::Client,
        timeout: Duration,
    ) -> Result<reqwest::Client, String> {
        if self.loopback {
            return Ok(shared.clone());
        }
        let host = self.url.host_str().unwrap_or_default().to_owned();
        let port = self.url.port_or_known_default().unwrap_or(443);
        let resolved =
            tokio::time::timeout(timeout, tokio::net::lookup_host((host.as_str(), port)))
                .await
                .map_err(|_| format!("{host} did not resolve in time"))?
                .map_err(|e| format!("{host} does not resolve: {e}"))?;
        let addresses: Vec<std::net::SocketAddr> = resolved.collect();
        if addresses.is_empty() || addresses.iter().any(|a| is_this_machine(a.ip())) {
            return Err(format!(
                "{host} resolves to this machine (or to nothing), which a named hook address may \
                 not reach; use a loopback address for a hook on this machine"
            ));
        }
        builder()
            .resolve_to_addrs(&host, &addresses)
            .build()
            .map_err(|e| format!("its client could not be made: {e}"))
    }
}

fn builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
}

/// One client for every HTTP hook on the loopback: it follows no redirect and goes through no
/// proxy.
pub(crate) fn client() -> reqwest::Client {
    builder().build().unwrap_or_default()
}

/// POSTs `body` to `address`, waiting at most `timeout`.
pub(crate) async fn post(
    client: &reqwest::Client,
    address: &Address,
    body: Vec<u8>,
    timeout: Duration,
) -> Ended {
    let client = match address.client(client, timeout).await {
        Ok(client) => client,
        Err(why) => return Ended::Failed(why),
    };
    let sent = client
        .post(address.url.clone())
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
    let text = match tokio::time::timeout(timeout, read_capped(response)).await {
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

/// The answer's body, refused past [`MAX_ANSWER_BYTES`].
async fn read_capped(mut response: reqwest::Response) -> Result<String, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(format!("it is longer than {MAX_ANSWER_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}
