//! Egress to named domains only: `allowed_domains` opens the network of a command that has
//! none to those names, through a proxy the daemon runs for the run.
//!
//! Each command gets a proxy of its own (so what it was refused is told to it, not to a command
//! running beside it), listening on a unix socket in the run's private temporary directory;
//! inside the
//! command's empty network namespace the inner layer bridges `127.0.0.1:3128` to it (see
//! [`super::bridge`]), and `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY` point there. It speaks HTTP
//! `CONNECT` (for TLS) and plain HTTP with an absolute URI, resolves names itself (the command
//! needs no DNS), and refuses any other name with a `403` that names the knob. An allowed name
//! that resolves to this machine (loopback, unspecified, link-local) is refused too, unless the
//! list names `localhost` or the address itself: a name must not lead back to the services the
//! network namespace keeps out of reach. Every decision is published as an `EgressDecision`
//! event of the run (and so kept in its run log).

use crate::event::{EventKind, RunEvents};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};

/// The port the bridge listens on inside the command's network namespace.
pub(super) const BRIDGE_PORT: u16 = 3128;
/// The most a request's head may weigh.
const MAX_HEAD: usize = 16 * 1024;
/// How long a client has to send its request's head, and an upstream to answer a connect.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// The longest an egress connection lives (a command's longest timeout).
const LONGEST: Duration = Duration::from_secs(3600);

/// The names `allowed_domains` lists: `crates.io` (that name only) or `*.npmjs.org` (its
/// subdomains only), lowercased.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct AllowedDomains(Vec<String>);

impl AllowedDomains {
    /// The list, checked: each entry a host name, an IP address, or `*.` and a name.
    pub(crate) fn parse(entries: &[String]) -> Result<Self, String> {
        let mut names = Vec::new();
        for entry in entries {
            let name = entry.trim().trim_end_matches('.').to_lowercase();
            let bare = name.strip_prefix("*.").unwrap_or(&name);
            let valid = !bare.is_empty()
                && bare
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'))
                && !bare.contains('*');
            if !valid {
                return Err(format!(
                    "'{entry}' is not a domain: write a name (\"crates.io\"), its subdomains \
                     (\"*.npmjs.org\") or an address, without a scheme, port or path; to open \
                     the whole network set network = true"
                ));
            }
            names.push(name);
        }
        Ok(Self(names))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The names, as listed.
    pub(crate) fn names(&self) -> &[String] {
        &self.0
    }

    /// Whether `host` may be reached.
    pub(crate) fn allows(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_lowercase();
        self.0
            .iter()
            .any(|pattern| match pattern.strip_prefix("*.") {
                Some(parent) => host
                    .strip_suffix(parent)
                    .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
                None => *pattern == host,
            })
    }

    /// Whether the list names this machine itself (`localhost`, or a loopback address).
    fn names_this_machine(&self, host: &str) -> bool {
        let host = host.to_lowercase();
        host == "localhost" && self.0.iter().any(|p| p == "localhost")
            || host.parse::<IpAddr>().is_ok() && self.0.contains(&host)
    }
}

/// A command's proxy: serving until dropped.
#[derive(Debug)]
pub(super) struct EgressProxy {
    socket: PathBuf,
    allowed: AllowedDomains,
    refused: Arc<Mutex<Vec<String>>>,
    task: tokio::task::AbortHandle,
}

/// What a connection is shared with.
struct Shared {
    allowed: AllowedDomains,
    events: Option<RunEvents>,
    refused: Arc<Mutex<Vec<String>>>,
}

impl EgressProxy {
    /// Starts serving on `socket`.
    pub(super) fn start(
        socket: PathBuf,
        allowed: AllowedDomains,
        events: Option<RunEvents>,
    ) -> io::Result<Self> {
        let listener = UnixListener::bind(&socket)?;
        let refused = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::new(Shared {
            allowed: allowed.clone(),
            events,
            refused: refused.clone(),
        });
        let task = tokio::spawn(async move {
            // The connections live in the accepting task's set: when the proxy goes (the
            // command is done), they go with it.
            let mut connections = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok((stream, _)) => {
                            connections.spawn(serve(stream, shared.clone()));
                        }
                        Err(e) => {
                            tracing::warn!("the egress proxy cannot accept: {e}");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    },
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            }
        })
        .abort_handle();
        Ok(Self {
            socket,
            allowed,
            refused,
            task,
        })
    }

    /// The names it lets through.
    pub(super) fn allowed(&self) -> &[String] {
        self.allowed.names()
    }

    /// The socket the bridge connects to.
    pub(super) fn socket(&self) -> &Path {
        &self.socket
    }

    /// The names it refused, each once, sorted.
    pub(super) fn refused(&self) -> Vec<String> {
        let mut refused = self
            .refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        refused.sort();
        refused.dedup();
        refused
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.task.abort();
        if let Err(e) = std::fs::remove_file(&self.socket) {
            tracing::debug!("{}: {e}", self.socket.display());
        }
    }
}

/// A request's target, as a proxy is asked for it.
#[derive(Debug, PartialEq)]
struct Target {
    host: String,
    port: u16,
    /// `None` for `CONNECT`; else the request head rewritten for the origin server.
    forward: Option<Vec<u8>>,
}

/// Reads the request's head from `client` and serves it: a tunnel, a forwarded request, or a
/// refusal.
async fn serve(mut client: UnixStream, shared: Arc<Shared>) {
    let (head, rest) = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(read)) => read,
        Ok(Err(why)) => return answer(&mut client, 400, &why).await,
        Err(_) => return,
    };
    let target = match parse_head(&head) {
        Ok(target) => target,
        Err(why) => return answer(&mut client, 400, &why).await,
    };
    let decision = decide(&shared.allowed, &target.host, target.port).await;
    let allowed = decision.is_ok();
    let reason = match &decision {
        Ok(_) => "in allowed_domains".to_owned(),
        Err(why) => why.clone(),
    };
    tracing::info!(host = %target.host, port = target.port, allowed, "egress: {reason}");
    if let Some(events) = &shared.events {
        events.emit(EventKind::EgressDecision {
            host: target.host.clone(),
            port: target.port,
            allowed,
            reason: reason.clone(),
        });
    }
    let addresses = match decision {
        Ok(addresses) => addresses,
        Err(why) => {
            shared
                .refused
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(target.host.clone());
            return answer(&mut client, 403, &why).await;
        }
    };
    let upstream = match connect(&addresses).await {
        Ok(upstream) => upstream,
        Err(e) => {
            let why = format!("{}:{} could not be reached: {e}", target.host, target.port);
            return answer(&mut client, 502, &why).await;
        }
    };
    if let Err(e) = relay(client, upstream, target.forward, rest).await {
        tracing::debug!("egress to {} ended: {e}", target.host);
    }
}

/// Where `host` may be reached, or why it may not.
async fn decide(
    allowed: &AllowedDomains,
    host: &str,
    port: u16,
) -> Result<Vec<SocketAddr>, String> {
    if !allowed.allows(host) {
        return Err(format!(
            "ryvos sandbox: egress to {host} is refused: it is not in [security.sandbox] \
             allowed_domains (add it there to open it knowingly)"
        ));
    }
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| format!("ryvos sandbox: {host} does not resolve: {e}"))?
        .collect();
    leads_elsewhere(allowed, host, &addresses)?;
    Ok(addresses)
}

/// Whether `ip` is this machine's own: loopback, unspecified, or link-local (where a cloud's
/// metadata service answers).
pub(crate) fn is_this_machine(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_unspecified() || v4.is_link_local(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.is_unspecified() || v6.is_unicast_link_local(),
    }
}

/// Refuses `addresses` of `host` that are this machine's own (loopback, unspecified,
/// link-local), unless the list names this machine.
fn leads_elsewhere(
    allowed: &AllowedDomains,
    host: &str,
    addresses: &[SocketAddr],
) -> Result<(), String> {
    if !allowed.names_this_machine(host) && addresses.iter().any(|a| is_this_machine(a.ip())) {
        return Err(format!(
            "ryvos sandbox: {host} resolves to this machine, which commands may not reach"
        ));
    }
    Ok(())
}

async fn connect(addresses: &[SocketAddr]) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    for address in addresses {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => last = e,
            Err(_) => last = io::Error::new(io::ErrorKind::TimedOut, "connect timed out"),
        }
    }
    Err(last)
}

/// Joins `client` and `upstream`: after `200` for a tunnel, or after forwarding the rewritten
/// head and what followed it.
async fn relay(
    mut client: UnixStream,
    mut upstream: TcpStream,
    forward: Option<Vec<u8>>,
    rest: Vec<u8>,
) -> io::Result<()> {
    match forward {
        None => {
            client
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await?
        }
        Some(head) => upstream.write_all(&head).await?,
    }
    upstream.write_all(&rest).await?;
    // Bounded by its command's life (the proxy's connections are aborted with it), and by
    // LONGEST whatever the command's timeout.
    let copying = tokio::io::copy_bidirectional(&mut client, &mut upstream);
    match tokio::time::timeout(LONGEST, copying).await {
        Ok(copied) => copied.map(drop),
        Err(_) => {
            tracing::debug!("an egress connection outlived {LONGEST:?}; closing it");
            Ok(())
        }
    }
}

async fn answer(client: &mut UnixStream, status: u16, why: &str) {
    let text = match status {
        403 => "Forbidden",
        502 => "Bad Gateway",
        _ => "Bad Request",
    };
    let body = format!("{why}\n");
    let response = format!(
        "HTTP/1.1 {status} {text}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if let Err(e) = client.write_all(response.as_bytes()).await {
        tracing::debug!("the egress proxy could not answer: {e}");
    }
}

/// The request's head (through the blank line) and whatever came after it.
async fn read_head(client: &mut UnixStream) -> Result<(Vec<u8>, Vec<u8>), String> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = find(&buffer, b"\r\n\r\n") {
            let rest = buffer.split_off(end + 4);
            return Ok((buffer, rest));
        }
        if buffer.len() > MAX_HEAD {
            return Err(format!(
                "the request's head is longer than {MAX_HEAD} bytes"
            ));
        }
        let n = client.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the connection closed before the request's head ended".into());
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The target of a proxy request: `CONNECT host:port`, or a method with an absolute `http://`
/// URI (rewritten to the origin form for the server).
fn parse_head(head: &[u8]) -> Result<Target, String> {
    let text = std::str::from_utf8(head).map_err(|_| "the request's head is not text")?;
    let (line, fields) = text.split_once("\r\n").unwrap_or((text, ""));
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("not an HTTP request line: {line}"));
    };
    if method == "CONNECT" {
        let (host, port) = split_host_port(target, 443)?;
        return Ok(Target {
            host,
            port,
            forward: None,
        });
    }
    let Some(rest) = target.strip_prefix("http://") else {
        return Err(format!(
            "the proxy takes CONNECT or an absolute http:// URI, not {target}"
        ));
    };
    let (authority, path) = match rest.find('/') {
        Some(slash) => (&rest[..slash], &rest[slash..]),
        None => (rest, "/"),
    };
    let (host, port) = split_host_port(authority, 80)?;
    let forward = format!("{method} {path} {version}\r\n{fields}").into_bytes();
    Ok(Target {
        host,
        port,
        forward: Some(forward),
    })
}

fn split_host_port(authority: &str, default: u16) -> Result<(String, u16), String> {
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    // [v6]:port, host:port, or a host alone.
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or("an unclosed [ in the address")?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => p.parse().map_err(|_| format!("'{p}' is not a port"))?,
        None => default,
    };
    if host.is_empty() {
        return Err("the request names no host".into());
    }
    Ok((host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domains(list: &[&str]) -> AllowedDomains {
        AllowedDomains::parse(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn names_match_exactly_and_wildcards_match_subdomains_only() {
        let allowed = domains(&["crates.io", "*.npmjs.org", "Static.Example.COM."]);
        assert!(allowed.allows("crates.io"));
        assert!(allowed.allows("CRATES.IO."));
        assert!(!allowed.allows("index.crates.io"));
        assert!(!allowed.allows("evilcrates.io"));
        assert!(allowed.allows("registry.npmjs.org"));
        assert!(!allowed.allows("npmjs.org"));
        assert!(!allowed.allows("evilnpmjs.org"));
        assert!(allowed.allows("static.example.com"));
        for bad in ["*", "https://crates.io", "crates.io/x", "a*.b", ""] {
            assert!(AllowedDomains::parse(&[bad.to_owned()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn requests_name_their_target() {
        let connect = parse_head(b"CONNECT crates.io:443 HTTP/1.1\r\nHost: crates.io\r\n\r\n");
        assert_eq!(
            connect.unwrap(),
            Target {
                host: "crates.io".into(),
                port: 443,
                forward: None
            }
        );
        let get = parse_head(b"GET http://example.com:8080/a?b HTTP/1.1\r\nHost: x\r\n\r\n");
        let get = get.unwrap();
        assert_eq!((get.host.as_str(), get.port), ("example.com", 8080));
        assert_eq!(
            get.forward.unwrap(),
            b"GET /a?b HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()
        );
        let v6 = parse_head(b"CONNECT [::1]:22 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!((v6.host.as_str(), v6.port), ("::1", 22));
        assert!(parse_head(b"GET /relative HTTP/1.1\r\n\r\n").is_err());
        assert!(parse_head(b"nonsense\r\n\r\n").is_err());
    }

    #[tokio::test]
    async fn a_name_leading_back_to_this_machine_is_refused_unless_named() {
        let allowed = domains(&["localhost"]);
        assert!(decide(&allowed, "localhost", 80).await.is_ok());
        assert!(decide(&allowed, "example.com", 80).await.is_err());
        let loopback: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let outside: SocketAddr = "93.184.215.14:80".parse().unwrap();
        let rebinding = domains(&["cdn.example.com"]);
        assert!(leads_elsewhere(&rebinding, "cdn.example.com", &[outside]).is_ok());
        assert!(leads_elsewhere(&rebinding, "cdn.example.com", &[outside, loopback]).is_err());
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:80".parse().unwrap();
        assert!(leads_elsewhere(&rebinding, "cdn.example.com", &[mapped]).is_err());
        let literal = domains(&["127.0.0.1"]);
        assert!(leads_elsewhere(&literal, "127.0.0.1", &[loopback]).is_ok());
    }
}
