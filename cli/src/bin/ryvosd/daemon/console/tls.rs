//! The console over TLS: rustls, with the certificate chain and key `[http]` names, and a
//! listener that hands axum connections once their handshake is done.

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// How long a client may take over its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The acceptor for `cert` (a PEM chain) and `key` (its PEM private key); why there is none.
pub(super) fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("[http] tls_cert {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "[http] tls_cert {}: no certificate in it (a PEM file is expected)",
            cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("[http] tls_key {}: {e}", key.display()))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
        .map_err(|e| format!("[http] tls_cert and tls_key: {e}"))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Accepts TCP connections and completes their handshakes; one that fails or is too slow is
/// dropped, and accepting goes on.
pub(super) struct Listener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl Listener {
    pub(super) fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> Self {
        Self { tcp, acceptor }
    }
}

impl axum::serve::Listener for Listener {
    type Io = TlsStream<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, address) = match self.tcp.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little, never spin.
                    tracing::warn!("the console could not accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.acceptor.accept(stream));
            match handshake.await {
                Ok(Ok(tls)) => return (tls, address),
                Ok(Err(e)) => tracing::debug!(%address, "a console handshake failed: {e}"),
                Err(_) => tracing::debug!(%address, "a console handshake took too long"),
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
