//! The console over TLS: rustls, with the certificate chain and key `[http]` names, and a
//! listener that hands axum connections once their handshake is done.

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::net::SocketAddr;
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

/// Hands axum the connections whose handshakes are done. Handshakes run in tasks of their own,
/// at most [`HANDSHAKES_AT_ONCE`] together, so a client that connects and says nothing holds
/// up no one else; one that fails or is too slow is dropped.
pub(super) struct Listener {
    ready: tokio::sync::mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    address: SocketAddr,
}

/// Handshakes in flight at once, at most.
const HANDSHAKES_AT_ONCE: usize = 128;

impl Listener {
    /// Accepts on `tcp` until the listener is dropped.
    pub(super) fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> std::io::Result<Self> {
        let address = tcp.local_addr()?;
        let (done, ready) = tokio::sync::mpsc::channel(HANDSHAKES_AT_ONCE);
        tokio::spawn(accept_all(tcp, acceptor, done));
        Ok(Self { ready, address })
    }
}

/// Accepts connections and starts their handshakes, until no one takes them any more.
async fn accept_all(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    done: tokio::sync::mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(HANDSHAKES_AT_ONCE));
    loop {
        let accepted = tokio::select! {
            () = done.closed() => return,
            accepted = tcp.accept() => accepted,
        };
        let (stream, address) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: wait a little, never spin.
                tracing::warn!("the console could not accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let (acceptor, done) = (acceptor.clone(), done.clone());
        tokio::spawn(async move {
            let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream));
            match handshake.await {
                Ok(Ok(tls)) => {
                    // Refused only once the console has stopped: the connection goes with it.
                    if done.send((tls, address)).await.is_err() {
                        tracing::debug!(%address, "the console stopped during a handshake");
                    }
                }
                Ok(Err(e)) => tracing::debug!(%address, "a console handshake failed: {e}"),
                Err(_) => tracing::debug!(%address, "a console handshake took too long"),
            }
            drop(slot);
        });
    }
}

impl axum::serve::Listener for Listener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(ready) => ready,
            // The accepting task holds a sender until this listener is dropped, and it does not
            // end on its own: this is never reached while serving.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.address)
    }
}
