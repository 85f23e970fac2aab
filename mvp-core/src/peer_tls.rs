//! TLS material for talking to peers (docs/mvp-behaviour.md §5): trust `--peer-ca-file`, present the
//! front-proxy client certificate (`--proxy-client-cert-file`/`--proxy-client-key-file`),
//! and verify the peer's serving certificate for `kubernetes.default.svc`, whatever address
//! was dialed.

use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// The DNS name every peer's serving certificate is verified against (and sent as SNI).
pub const PEER_SERVER_NAME: &str = "kubernetes.default.svc";

/// Errors building the peer TLS configuration.
#[derive(Debug, thiserror::Error)]
pub enum PeerTlsError {
    /// `--proxy-client-cert-file` is empty (upstream's startup failure message).
    #[error("error building peer proxy handler, proxy-cert-file not specified")]
    ProxyCertFileNotSpecified,
    /// `--proxy-client-key-file` is empty (upstream's startup failure message).
    #[error("error building peer proxy handler, proxy-key-file not specified")]
    ProxyKeyFileNotSpecified,
    /// A file could not be read.
    #[error("error reading {path}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// PEM data held no certificate, or was malformed.
    #[error("no valid certificates found in {0}")]
    NoCertificates(String),
    /// PEM data held no private key, or was malformed.
    #[error("no valid private key found in {0}")]
    NoPrivateKey(String),
    /// The name to verify peers for is not a valid DNS name or IP address.
    #[error("invalid peer server name {0:?}")]
    InvalidServerName(String),
    /// rustls rejected the CA, certificate or key.
    #[error("invalid peer TLS material")]
    Rustls(#[from] rustls::Error),
    /// No rustls crypto provider: the `ring` feature is off and the process installed no
    /// default (`CryptoProvider::install_default`).
    #[error("no rustls crypto provider: enable mvp-core's `ring` feature or install a process-wide default")]
    NoCryptoProvider,
}

/// The crypto provider for the crate's TLS: the process-wide default when the embedding server
/// installed one (so that it picks the provider, e.g. aws-lc-rs for FIPS), else *ring* with the
/// `ring` feature (on by default), else none.
pub(crate) fn crypto_provider() -> Option<Arc<rustls::crypto::CryptoProvider>> {
    if let Some(provider) = rustls::crypto::CryptoProvider::get_default() {
        return Some(provider.clone());
    }
    #[cfg(feature = "ring")]
    {
        Some(Arc::new(rustls::crypto::ring::default_provider()))
    }
    #[cfg(not(feature = "ring"))]
    {
        None
    }
}

/// Certificates and key for peer connections.
#[derive(Debug)]
pub struct PeerTlsConfig {
    /// CA certificates peers' serving certificates must chain to (`--peer-ca-file`).
    pub peer_ca: Vec<CertificateDer<'static>>,
    /// The proxy client certificate chain (`--proxy-client-cert-file`).
    pub client_cert_chain: Vec<CertificateDer<'static>>,
    /// The proxy client key (`--proxy-client-key-file`).
    pub client_key: PrivateKeyDer<'static>,
}

impl Clone for PeerTlsConfig {
    fn clone(&self) -> Self {
        Self {
            peer_ca: self.peer_ca.clone(),
            client_cert_chain: self.client_cert_chain.clone(),
            client_key: self.client_key.clone_key(),
        }
    }
}

impl PeerTlsConfig {
    /// Loads the three PEM files named by the kube-apiserver flags. Empty cert or key paths
    /// fail with upstream's messages.
    pub fn from_files(
        peer_ca_file: &str,
        proxy_client_cert_file: &str,
        proxy_client_key_file: &str,
    ) -> Result<Self, PeerTlsError> {
        if proxy_client_cert_file.is_empty() {
            return Err(PeerTlsError::ProxyCertFileNotSpecified);
        }
        if proxy_client_key_file.is_empty() {
            return Err(PeerTlsError::ProxyKeyFileNotSpecified);
        }
        let read = |path: &str| {
            std::fs::read(path).map_err(|source| PeerTlsError::Read {
                path: path.to_owned(),
                source,
            })
        };
        Ok(Self {
            peer_ca: certificates_from_pem(&read(peer_ca_file)?, peer_ca_file)?,
            client_cert_chain: certificates_from_pem(&read(proxy_client_cert_file)?, proxy_client_cert_file)?,
            client_key: private_key_from_pem(&read(proxy_client_key_file)?, proxy_client_key_file)?,
        })
    }

    /// A rustls client configuration trusting only `peer_ca` and presenting the client
    /// certificate. ALPN is left empty (hyper-rustls sets `h2`, `http/1.1`).
    pub fn client_config(&self) -> Result<ClientConfig, PeerTlsError> {
        let mut roots = RootCertStore::empty();
        for ca in &self.peer_ca {
            roots.add(ca.clone())?;
        }
        let provider = crypto_provider().ok_or(PeerTlsError::NoCryptoProvider)?;
        Ok(ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_client_auth_cert(self.client_cert_chain.clone(), self.client_key.clone_key())?)
    }
}

/// Every certificate of a PEM bundle; `what` names the source in errors.
pub(crate) fn certificates_from_pem(
    pem: &[u8],
    what: &str,
) -> Result<Vec<CertificateDer<'static>>, PeerTlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|_| PeerTlsError::NoCertificates(what.to_owned()))?;
    if certs.is_empty() {
        return Err(PeerTlsError::NoCertificates(what.to_owned()));
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) of a PEM file; `what` names the source.
pub(crate) fn private_key_from_pem(pem: &[u8], what: &str) -> Result<PrivateKeyDer<'static>, PeerTlsError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|_| PeerTlsError::NoPrivateKey(what.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_proxy_client_files_fail_with_upstream_messages() {
        let err = PeerTlsConfig::from_files("ca.crt", "", "k").unwrap_err();
        assert_eq!(
            err.to_string(),
            "error building peer proxy handler, proxy-cert-file not specified"
        );
        let err = PeerTlsConfig::from_files("ca.crt", "c", "").unwrap_err();
        assert_eq!(
            err.to_string(),
            "error building peer proxy handler, proxy-key-file not specified"
        );
    }

    #[test]
    fn loads_pem_files_and_builds_client_config() {
        let pki = crate::test_pki::TestPki::new();
        let dir = tempfile::tempdir().unwrap();
        let (chain, key) = pki.front_proxy_client("misty");
        let write = |name: &str, label: &str, der: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem_encode(label, der)).unwrap();
            path.to_str().unwrap().to_owned()
        };
        let ca = write("ca.crt", "CERTIFICATE", &pki.cluster_ca.cert_der());
        let cert = write("proxy.crt", "CERTIFICATE", &chain[0]);
        let key = write("proxy.key", "PRIVATE KEY", key.secret_der());
        let cfg = PeerTlsConfig::from_files(&ca, &cert, &key).unwrap();
        assert_eq!(cfg.peer_ca.len(), 1);
        assert!(cfg.client_config().unwrap().alpn_protocols.is_empty());
        let err = PeerTlsConfig::from_files(&key, &cert, &key).unwrap_err();
        assert!(matches!(err, PeerTlsError::NoCertificates(_)), "{err}");
        let err = PeerTlsConfig::from_files(&ca, &cert, "/nonexistent/key").unwrap_err();
        assert!(
            err.to_string().starts_with("error reading /nonexistent/key"),
            "{err}"
        );
    }

    fn pem_encode(label: &str, der: &[u8]) -> String {
        const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut b64 = String::new();
        for chunk in der.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |acc, (i, &b)| acc | (u32::from(b) << (16 - 8 * i)));
            for i in 0..4 {
                if i <= chunk.len() {
                    b64.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
                } else {
                    b64.push('=');
                }
            }
        }
        let lines: Vec<&str> = b64
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        format!(
            "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
            lines.join("\n")
        )
    }
}
