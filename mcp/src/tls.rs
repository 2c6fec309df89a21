//! TLS towards `https://` servers, and for `--listen`'s clients.
//!
//! Towards servers: rustls, trusting the system's root
//! certificates (as curl does: the platform's store, or the files named by
//! `SSL_CERT_FILE` / `SSL_CERT_DIR`) and, when the config names one,
//! `mcp.ca_file`'s certificates besides (a private CA's, or a server's own
//! self-signed one). The server's certificate must name the URL's host;
//! nothing lets a proxy skip that check.
//!
//! The roots are read once per process and `ca_file`, the first time an
//! `https://` server is reached (at start, when the command line or the
//! config names one).
//!
//! For clients (`--listen ADDR --tls-cert FILE --tls-key FILE`): the
//! certificate chain and its key, read at start; TLS 1.2 or 1.3, HTTP/1.1.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore, ServerConfig};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// A connection's stream, plain or TLS: one type, so that hyper's code for
/// a connection is compiled once.
pub trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Stream for T {}

/// Why TLS towards a server cannot be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// `mcp.ca_file` could not be read.
    #[error("cannot read mcp.ca_file {path}: {why}; it takes a file of PEM certificates (-----BEGIN CERTIFICATE-----)")]
    CaFile {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// `--tls-cert` or `--tls-key` could not be used.
    #[error("cannot serve TLS with {what} {path}: {why}")]
    Serving {
        /// Which file: the certificate chain or the key.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// Nothing to trust.
    #[error("no trusted root certificates for https:// servers: the system's store gave none{why}; install the system's CA certificates (ca-certificates), point SSL_CERT_FILE at a bundle, or name one in mcp.ca_file")]
    NoRoots {
        /// What the store said, when it said something.
        why: String,
    },
}

/// A connector trusting the system's roots and `ca_file`'s certificates
/// (read once per process for each `ca_file`; a failure is not kept, so
/// a fixed file is read at the next session).
pub fn connector(ca_file: Option<&Path>) -> Result<TlsConnector, TlsError> {
    static BUILT: OnceLock<Mutex<HashMap<Option<PathBuf>, TlsConnector>>> = OnceLock::new();
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    let key = ca_file.map(Path::to_owned);
    if let Some(connector) = built.get(&key) {
        return Ok(connector.clone());
    }
    let connector = build(ca_file)?;
    built.insert(key, connector.clone());
    Ok(connector)
}

/// An acceptor serving the certificate chain in `cert` (PEM, the server's
/// own first) with the private key in `key` (PEM: PKCS #8, PKCS #1 or
/// SEC 1).
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let bad = |what, path: &Path, why: String| TlsError::Serving { what, path: path.to_owned(), why };
    let chain = certificates(cert).map_err(|why| {
        bad("the certificate chain", cert, format!("{why} (--tls-cert takes PEM certificates)"))
    })?;
    // Never the key's bytes in an error: what kind of problem, only.
    let private = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| bad("the key", key, format!("{e} (--tls-key takes a PEM private key)")))?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring's provider supports the default protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| {
            bad("the key", key, format!("it does not serve the certificate of {}: {e}", cert.display()))
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn build(ca_file: Option<&Path>) -> Result<TlsConnector, TlsError> {
    let mut roots = RootCertStore::empty();
    let system = rustls_native_certs::load_native_certs();
    let (added, _ignored) = roots.add_parsable_certificates(system.certs);
    if added > 0 {
        tracing::debug!("{added} root certificates from the system's store");
    }
    if let Some(path) = ca_file {
        let bad = |why: String| TlsError::CaFile { path: path.to_owned(), why };
        for cert in certificates(path).map_err(bad)? {
            roots.add(cert).map_err(|e| bad(format!("a certificate in it is not a CA's: {e}")))?;
        }
    }
    if roots.is_empty() {
        let why = system.errors.first().map(|e| format!(" ({e})")).unwrap_or_default();
        return Err(TlsError::NoRoots { why });
    }
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring's provider supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    // The transport speaks HTTP/1.1.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

/// The PEM certificates in `path`, at least one; why not, as text.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| e.to_string())?;
    match certs.is_empty() {
        true => Err("it holds no certificate".into()),
        false => Ok(certs),
    }
}

/// The cryptography both sides use: ring's.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    // rustls marks ring's provider deprecated for having no post-quantum
    // key exchange; aws-lc-rs's has one, but needs cmake and minutes of C
    // on two cores (and in the Windows cross-build). The key exchange here
    // is X25519 or ECDHE, as most servers offer today.
    #[expect(deprecated, reason = "ring builds with the C compiler alone")]
    Arc::new(rustls::crypto::ring::default_provider())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_that_is_missing_empty_or_not_pem_is_named_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let error = build(Some(&missing)).err().unwrap().to_string();
        assert!(error.contains("cannot read mcp.ca_file") && error.contains("missing.pem"), "{error}");
        assert!(error.contains("PEM certificates"), "{error}");

        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let error = build(Some(&empty)).err().unwrap().to_string();
        assert!(error.contains("holds no certificate"), "{error}");

        let broken = dir.path().join("broken.pem");
        std::fs::write(&broken, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").unwrap();
        let error = build(Some(&broken)).err().unwrap().to_string();
        assert!(error.contains("broken.pem"), "{error}");
    }
}
