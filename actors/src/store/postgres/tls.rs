//! TLS to PostgreSQL, as libpq understands it: `sslmode` (`disable`, `prefer` — the default —,
//! `require`, `verify-ca`, `verify-full`), `sslrootcert` (the CA that signed the server's
//! certificate; `system` for the system's roots), and a client certificate (`sslcert`,
//! `sslkey`), all in the URL's query. Built on rustls through `tokio-postgres-rustls` (the
//! rustls binding of the rust-postgres ecosystem; rustls is already what the model clients use,
//! so no OpenSSL is linked).
//!
//! As in libpq: `prefer` and `require` encrypt without checking whom they talk to (`require`
//! with `sslrootcert` checks the chain, as `verify-ca`); `verify-ca` checks the chain;
//! `verify-full` checks the chain and that the certificate names the host. Across machines,
//! use `verify-full`.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

/// `sslmode`, as libpq names its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<Self, String> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            // libpq's "allow" tries without TLS first: nothing a store should want.
            other => {
                return Err(format!(
                    "sslmode={other} is not one of disable, prefer, require, verify-ca, \
                     verify-full"
                ))
            }
        })
    }

    /// The name libpq gives it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// The TLS settings of a store URL.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TlsSettings {
    pub mode: SslMode,
    pub root_cert: Option<String>,
    pub client_cert: Option<String>,
    pub client_key: Option<String>,
}

impl TlsSettings {
    /// Whether the server's certificate chain is checked.
    pub(crate) fn verifies_chain(&self) -> bool {
        match self.mode {
            SslMode::VerifyCa | SslMode::VerifyFull => true,
            SslMode::Require => self.root_cert.is_some(),
            SslMode::Disable | SslMode::Prefer => false,
        }
    }

    /// What tokio-postgres is told: whether TLS is tried, and whether it is required.
    pub(crate) fn driver_mode(&self) -> tokio_postgres::config::SslMode {
        match self.mode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            _ => tokio_postgres::config::SslMode::Require,
        }
    }
}

/// Takes the TLS parameters out of `url`: the URL tokio-postgres can parse, and the settings.
pub(crate) fn split_url(url: &str) -> Result<(String, TlsSettings), String> {
    let mut settings = TlsSettings {
        mode: SslMode::Prefer,
        root_cert: None,
        client_cert: None,
        client_key: None,
    };
    let is_url = url.starts_with("postgres://") || url.starts_with("postgresql://");
    // A URL's parameters are its query, percent-encoded; a key=value string's are its words.
    let (base, params, separator) = match (is_url, url.split_once('?')) {
        (true, Some((base, query))) => (base, query, "&"),
        (true, None) => return Ok((url.to_owned(), settings)),
        (false, _) => ("", url, " "),
    };
    let mut kept = Vec::new();
    for pair in params.split(separator).filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = match is_url {
            true => percent_decode(value),
            false => value.trim_matches('\'').to_owned(),
        };
        match key.trim() {
            "sslmode" => settings.mode = SslMode::parse(&value)?,
            "sslrootcert" => settings.root_cert = Some(value),
            "sslcert" => settings.client_cert = Some(value),
            "sslkey" => settings.client_key = Some(value),
            _ => kept.push(pair),
        }
    }
    if settings.client_cert.is_some() != settings.client_key.is_some() {
        return Err("sslcert and sslkey go together: give both, or neither".into());
    }
    // As libpq: checking a chain without the name means something only against a CA of one's
    // own; any public CA signs certificates for other names.
    let system = settings.root_cert.as_deref() == Some("system");
    match settings.mode {
        SslMode::VerifyCa if settings.root_cert.is_none() || system => {
            return Err(
                "sslmode=verify-ca needs sslrootcert naming the CA's file (with public \
                        roots, any certificate they signed would pass): give it, or use \
                        verify-full"
                    .into(),
            )
        }
        SslMode::Require | SslMode::Prefer if system => {
            return Err("sslrootcert=system needs sslmode=verify-full".into())
        }
        _ => {}
    }
    let url = match (is_url, kept.is_empty()) {
        (true, true) => base.to_owned(),
        (true, false) => format!("{base}?{}", kept.join("&")),
        (false, _) => kept.join(" "),
    };
    Ok((url, settings))
}

fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (byte, ..) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The connector for `settings`.
pub(crate) fn connector(settings: &TlsSettings) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let chain = match settings.verifies_chain() {
        true => Some(
            WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots(settings.root_cert.as_deref())?),
                provider.clone(),
            )
            .build()
            .map_err(|e| format!("TLS: {e}"))?,
        ),
        false => None,
    };
    let verifier = Verifier {
        chain,
        name: settings.mode == SslMode::VerifyFull,
        provider,
    };
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    let config = match (&settings.client_cert, &settings.client_key) {
        (Some(cert), Some(key)) => {
            let certs = CertificateDer::pem_file_iter(cert)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("sslcert {cert}: {e}"))?;
            let key =
                PrivateKeyDer::from_pem_file(key).map_err(|e| format!("sslkey {key}: {e}"))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| format!("sslcert/sslkey: {e}"))?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(MakeRustlsConnect::new(config))
}

/// The roots a chain is checked against: `sslrootcert`'s certificates, or with `system` (or
/// none given, which only `verify-full` allows) the Mozilla roots webpki-roots carries.
fn roots(root_cert: Option<&str>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    match root_cert {
        None | Some("system") => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        Some(file) => {
            let certs = CertificateDer::pem_file_iter(file)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("sslrootcert {file}: {e}"))?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(format!("sslrootcert {file} holds no usable certificate"));
            }
        }
    }
    Ok(roots)
}

/// Checks the server as `sslmode` says: the chain against the roots (`verify-ca`, `require`
/// with a root), and the name too (`verify-full`), or nothing (`prefer`, `require`: encrypted,
/// whoever answers). The handshake's signatures are checked whatever the mode, so the session
/// keys are the certificate holder's.
#[derive(Debug)]
struct Verifier {
    chain: Option<Arc<WebPkiServerVerifier>>,
    /// The certificate must name the host.
    name: bool,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) if !self.name => Ok(ServerCertVerified::assertion()),
            checked => checked,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_parameters_are_taken_out_of_the_url() {
        let (url, tls) = split_url(
            "postgres://u:p@db.example.com:5432/ryvos?application_name=x&sslmode=verify-full\
             &sslrootcert=%2Fetc%2Fca.crt",
        )
        .unwrap();
        assert_eq!(
            url,
            "postgres://u:p@db.example.com:5432/ryvos?application_name=x"
        );
        assert_eq!(tls.mode, SslMode::VerifyFull);
        assert_eq!(tls.root_cert.as_deref(), Some("/etc/ca.crt"));
        assert!(tls.verifies_chain());
        let (url, tls) = split_url("postgres://localhost/ryvos").unwrap();
        assert_eq!(url, "postgres://localhost/ryvos");
        assert_eq!(tls.mode, SslMode::Prefer, "libpq's default");
        assert!(!tls.verifies_chain());
        assert!(split_url("postgres://h/d?sslmode=allow").is_err());
        assert!(split_url("postgres://h/d?sslmode=verify-ca").is_err());
        assert!(split_url("postgres://h/d?sslmode=verify-ca&sslrootcert=system").is_err());
        assert!(split_url("postgres://h/d?sslmode=require&sslrootcert=system").is_err());
        assert!(split_url("postgres://h/d?sslmode=verify-full&sslrootcert=system").is_ok());
        let (url, tls) =
            split_url("host=db.internal dbname=ryvos sslmode=verify-ca sslrootcert=/ca.crt")
                .unwrap();
        assert_eq!(url, "host=db.internal dbname=ryvos");
        assert_eq!(tls.mode, SslMode::VerifyCa);
        assert_eq!(tls.root_cert.as_deref(), Some("/ca.crt"));
        assert!(split_url("postgres://h/d?sslcert=/c.pem").is_err());
        let (_, tls) = split_url("postgres://h/d?sslmode=require&sslrootcert=/ca").unwrap();
        assert!(
            tls.verifies_chain(),
            "require with a root checks the chain, as libpq does"
        );
    }

    /// A server offering TLS with a certificate for `localhost`, and a fresh database's URL.
    fn server() -> Option<(ryvos_testkit::postgres::PostgresServer, String)> {
        use ryvos_testkit::postgres::{PostgresServer, Unavailable};
        match PostgresServer::start_tls() {
            Ok(server) => {
                let url = server.database().unwrap();
                Some((server, url))
            }
            Err(Unavailable::NotInstalled(why)) => {
                eprintln!("skipped: needs a PostgreSQL server and openssl: {why}");
                None
            }
            Err(Unavailable::Failed(why)) => panic!("the TLS test server: {why}"),
        }
    }

    async fn open(url: &str) -> Result<super::super::PostgresStore, crate::store::StoreError> {
        super::super::PostgresStore::open(url, 2, false, std::time::Duration::from_secs(30), "n")
            .await
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn each_sslmode_encrypts_and_verifies_as_libpq_does() {
        use crate::store::Storage;
        let Some((server, url)) = server() else {
            return;
        };
        let ca = server.ca().display().to_string();
        let other = server.other_ca().display().to_string();
        let by_name = url.replace("127.0.0.1", "localhost");
        // (host, TLS parameters, what the store says, or None: refused). The certificate
        // names localhost, not the address.
        let cases: [(&str, String, Option<&str>); 7] = [
            (
                &by_name,
                format!("sslmode=verify-full&sslrootcert={ca}"),
                Some("encrypted, the server's certificate and name verified"),
            ),
            (&url, format!("sslmode=verify-full&sslrootcert={ca}"), None),
            (
                &url,
                format!("sslmode=verify-ca&sslrootcert={ca}"),
                Some("encrypted, the server's certificate verified but not its name"),
            ),
            (
                &by_name,
                format!("sslmode=verify-ca&sslrootcert={other}"),
                None,
            ),
            (
                &url,
                "sslmode=require".into(),
                Some("encrypted, the server not verified"),
            ),
            (
                &url,
                "sslmode=prefer".into(),
                Some("encrypted, the server not verified"),
            ),
            (&url, "sslmode=disable".into(), Some("not encrypted")),
        ];
        for (base, query, says) in cases {
            let opened = open(&format!("{base}&{query}")).await;
            match (says, opened) {
                (Some(says), Ok(store)) => {
                    let said = store.security().unwrap();
                    assert!(said.starts_with(says), "{query}: {said}");
                }
                (None, Err(e)) => assert!(e.to_string().contains("certificate"), "{query}: {e}"),
                (Some(_), Err(e)) => panic!("{query} was refused: {e}"),
                (None, Ok(_)) => panic!("{query} was let through"),
            }
        }
    }
}
