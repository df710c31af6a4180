//! `[http]`: the console's HTTP door in `ryvosd`, off unless `listen` names an address.

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;

/// `[http]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Where the console listens (`127.0.0.1:7420`); empty: no HTTP door at all.
    pub listen: String,
    /// A PEM certificate chain: with `tls_key`, the console is served over TLS only.
    pub tls_cert: String,
    /// The PEM private key of `tls_cert`.
    pub tls_key: String,
    /// Serve a non-loopback address without TLS, knowingly (a TLS-terminating reverse proxy
    /// in front of it).
    pub allow_plaintext: bool,
}

/// How the console is to be served, as `[http]` asks.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpDoor {
    pub address: SocketAddr,
    /// The certificate chain and key files, when it is served over TLS.
    pub tls: Option<(PathBuf, PathBuf)>,
}

impl HttpConfig {
    /// The door to open, `None` when it is off; why it cannot be opened as configured: an
    /// address that is not one, half of a TLS pair, or a non-loopback address in plain text
    /// without `allow_plaintext`.
    pub fn door(&self) -> Result<Option<HttpDoor>, String> {
        if self.listen.is_empty() {
            return Ok(None);
        }
        let address: SocketAddr = self.listen.parse().map_err(|_| {
            format!(
                "[http] listen = \"{}\" is not an address and port: give one such as \
                 \"127.0.0.1:7420\", or leave it empty to serve no console",
                self.listen
            )
        })?;
        let tls = match (self.tls_cert.is_empty(), self.tls_key.is_empty()) {
            (true, true) => None,
            (false, false) => Some((PathBuf::from(&self.tls_cert), PathBuf::from(&self.tls_key))),
            _ => {
                return Err(
                    "[http] tls_cert and tls_key go together: give both (PEM files), or neither"
                        .into(),
                )
            }
        };
        if tls.is_none() && !address.ip().is_loopback() && !self.allow_plaintext {
            return Err(format!(
                "[http] listen = \"{address}\" is reachable from other machines, and the \
                 console's logins and approvals would cross the network in plain text: set \
                 tls_cert and tls_key, listen on 127.0.0.1, or (behind a reverse proxy that \
                 terminates TLS) set allow_plaintext = true knowingly"
            ));
        }
        Ok(Some(HttpDoor { address, tls }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(listen: &str) -> HttpConfig {
        HttpConfig {
            listen: listen.into(),
            ..HttpConfig::default()
        }
    }

    #[test]
    fn off_loopback_and_refused_addresses() {
        assert_eq!(http("").door(), Ok(None));
        let door = http("127.0.0.1:7420").door().unwrap().unwrap();
        assert_eq!(door.address.port(), 7420);
        assert!(http("[::1]:7420").door().unwrap().is_some());
        let refused = http("0.0.0.0:7420").door().unwrap_err();
        assert!(refused.contains("allow_plaintext"), "{refused}");
        let behind_a_proxy = HttpConfig {
            allow_plaintext: true,
            ..http("0.0.0.0:7420")
        };
        assert!(behind_a_proxy.door().unwrap().is_some());
        assert!(http("localhost")
            .door()
            .unwrap_err()
            .contains("127.0.0.1:7420"));
        let half = HttpConfig {
            tls_cert: "/etc/ryvos/cert.pem".into(),
            ..http("0.0.0.0:7420")
        };
        assert!(half.door().unwrap_err().contains("go together"));
    }
}
