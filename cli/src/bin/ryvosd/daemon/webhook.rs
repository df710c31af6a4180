//! POSTing JSON to someone's webhook: `[daemon] notify_url` (the operator's) and A2A push
//! targets (a caller's). A caller's URL is the daemon reaching out on a stranger's word, so
//! [`Reach::Public`] refuses one that is not a public address, checked on every POST and
//! connected to as checked (a name that resolves elsewhere later is not followed).

use reqwest::Url;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// How long a webhook may take to answer.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Where a webhook may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Anywhere: the operator configured it.
    Anywhere,
    /// Only at public addresses: not loopback, private, link-local or otherwise internal.
    Public,
}

/// A webhook to POST to: its URL, checked, and the address to connect to for it.
pub(crate) struct Webhook {
    url: Url,
    pinned: Option<(String, SocketAddr)>,
}

impl Webhook {
    /// `url` as a webhook `reach` allows, or what is wrong with it. `knob` names the setting
    /// that allows a non-public one, for the refusal to say.
    pub(crate) async fn checked(url: &str, reach: Reach, knob: &str) -> Result<Self, String> {
        let url = Url::parse(url).map_err(|e| format!("{url} is not a URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("{url} is not an http or https URL"));
        }
        let host = url
            .host_str()
            .ok_or_else(|| format!("{url} names no host"))?
            .to_owned();
        if reach == Reach::Anywhere {
            return Ok(Self { url, pinned: None });
        }
        let port = url.port_or_known_default().unwrap_or(80);
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let addresses: Vec<SocketAddr> =
            tokio::time::timeout(TIMEOUT, tokio::net::lookup_host((bare, port)))
                .await
                .map_err(|_| format!("{host} did not resolve within {TIMEOUT:?}"))?
                .map_err(|e| format!("{host} does not resolve: {e}"))?
                .collect();
        let first = *addresses
            .first()
            .ok_or_else(|| format!("{host} resolves to no address"))?;
        if let Some(inside) = addresses.iter().find(|a| !public(a.ip())) {
            return Err(format!(
                "{url} is at {}, not a public address: set {knob} = true to allow private ones",
                inside.ip()
            ));
        }
        Ok(Self {
            url,
            pinned: Some((bare.to_owned(), first)),
        })
    }

    /// POSTs `json` with `headers`; it must answer 2xx within [`TIMEOUT`].
    pub(crate) async fn post(&self, json: String, headers: &[(&str, &str)]) -> Result<(), String> {
        let mut client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            // A redirect would lead where no check was made.
            .redirect(reqwest::redirect::Policy::none());
        if let Some((host, address)) = &self.pinned {
            client = client.resolve(host, *address);
        }
        let client = client.build().map_err(|e| e.to_string())?;
        let mut request = (client.post(self.url.clone()))
            .header("content-type", "application/json")
            .body(json);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let answer = request.send().await.map_err(|e| e.to_string())?;
        match answer.status() {
            status if status.is_success() => Ok(()),
            status => Err(format!("{} answered {status}", self.url)),
        }
    }
}

/// Whether `ip` is an address on the public internet.
fn public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            let shared = a == 100 && (64..128).contains(&b); // 100.64.0.0/10
            let this_network = a == 0;
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_multicast()
                || v4.is_unspecified()
                || shared
                || this_network
                || a >= 240)
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => public(IpAddr::V4(v4)),
            None => {
                !(v6.is_loopback()
                    || v6.is_unspecified()
                    || v6.is_multicast()
                    || v6.is_unique_local()
                    || v6.is_unicast_link_local())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_are_public() {
        for inside in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!public(inside.parse().unwrap()), "{inside}");
        }
        for outside in ["93.184.215.14", "2606:4700::1111", "100.128.0.1"] {
            assert!(public(outside.parse().unwrap()), "{outside}");
        }
    }

    #[tokio::test]
    async fn a_strangers_webhook_at_an_inside_address_is_refused_naming_the_knob() {
        let refused = Webhook::checked("http://127.0.0.1:9/hook", Reach::Public, "[a2a] knob")
            .await
            .err()
            .unwrap();
        assert!(refused.contains("127.0.0.1") && refused.contains("[a2a] knob"));
        assert!(Webhook::checked("ftp://x/", Reach::Anywhere, "k")
            .await
            .is_err());
        let operators = Webhook::checked("http://127.0.0.1:9/", Reach::Anywhere, "k");
        assert!(operators.await.is_ok());
    }
}
