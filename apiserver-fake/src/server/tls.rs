//! TLS of the secure port: the serving certificate and how client certificates are asked for.

use std::sync::Arc;

use rustls::ServerConfig;
use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::{self, PemObject};

use super::ServerError;
use super::config::ServerOptions;
use crate::chain::authentication::read_pem_certs;
use crate::chain::x509_v1;

/// Go's `tls.RequestClientCert`: a client certificate is asked for (with the client CAs' names as
/// hints) and, when one is sent, the client must prove it holds its key; whether the chain is
/// trusted, current or from the right CA is the authenticators' question, answered per request.
/// X.509 v1 certificates, which Go accepts and webpki does not parse, have their proof checked by
/// [`x509_v1`].
#[derive(Debug)]
struct RequestClientCert {
    hints: Vec<rustls::DistinguishedName>,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl RequestClientCert {
    fn new(roots: &rustls::RootCertStore) -> Self {
        Self {
            hints: roots.subjects(),
            algorithms: rustls::crypto::ring::default_provider().signature_verification_algorithms,
        }
    }
}

impl rustls::server::danger::ClientCertVerifier for RequestClientCert {
    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        _end_entity: &rustls_pki_types::CertificateDer<'_>,
        _intermediates: &[rustls_pki_types::CertificateDer<'_>],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        Ok(rustls::server::danger::ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        if x509_v1::is_v1(cert) {
            return x509_v1::verify_handshake_signature(message, cert, dss, &self.algorithms, false);
        }
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        if x509_v1::is_v1(cert) {
            return x509_v1::verify_handshake_signature(message, cert, dss, &self.algorithms, true);
        }
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

pub(super) fn server_tls_config(options: &ServerOptions) -> Result<ServerConfig, ServerError> {
    let (Some(cert_file), Some(key_file)) =
        (&options.flags.tls_cert_file, &options.flags.tls_private_key_file)
    else {
        return Err(ServerError::ServingCert(
            "--tls-cert-file and --tls-private-key-file are required".into(),
        ));
    };
    let chain = read_pem_certs(cert_file)?;
    let key_pem = std::fs::read(key_file)
        .map_err(|e| ServerError::ServingCert(format!("failed to read {}: {e}", key_file.display())))?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        ServerError::ServingCert(match e {
            pem::Error::NoItemsFound => format!("{}: no private key found", key_file.display()),
            e => format!("{}: {e}", key_file.display()),
        })
    })?;

    // As kube-apiserver (`tls.RequestClientCert`): ask for a client certificate, naming the client
    // CAs as hints, but verify nothing in the handshake beyond the client's proof that it holds the
    // key. The authenticators verify the chain against the CA each trusts; a chain none accepts is a
    // 401 Status, not a failed handshake.
    let mut roots = rustls::RootCertStore::empty();
    for path in [
        &options.flags.client_ca_file,
        &options.flags.requestheader_client_ca_file,
    ]
    .into_iter()
    .flatten()
    {
        for cert in read_pem_certs(path)? {
            roots
                .add(cert)
                .map_err(|e| ServerError::ServingCert(format!("{}: {e}", path.display())))?;
        }
    }
    let builder = if roots.is_empty() {
        ServerConfig::builder().with_no_client_auth()
    } else {
        ServerConfig::builder().with_client_cert_verifier(Arc::new(RequestClientCert::new(&roots)))
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| ServerError::ServingCert(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
