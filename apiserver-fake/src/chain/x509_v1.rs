//! X.509 version 1 client certificates, which Go's `crypto/x509` accepts and webpki (rustls' verifier)
//! refuses.
//!
//! A certificate made by `openssl x509 -req` without an extensions file is a v1 certificate (no
//! extensions at all); many RBAC tutorials make their users' certificates that way, and kube-apiserver
//! authenticates them. rustls parses a client's certificate with webpki twice, to check the handshake
//! signature and (here, per request) to verify the chain, and webpki refuses v1 in both. For a v1 leaf
//! this module does both instead, with a maintained parser and verifier (x509-parser with its
//! `verify` feature, on ring):
//!
//! * the handshake signature is checked against the certificate's public key with the same algorithms
//!   rustls offers ([`verify_handshake_signature`]);
//! * the chain is a leaf issued directly by a trusted CA: the CA's subject is the leaf's issuer, the
//!   leaf's signature verifies with the CA's key, and both are within their validity
//!   ([`issued_by_trusted_ca`]). With no extensions a v1 certificate has no key-usage restriction, so Go's
//!   `ExtKeyUsageClientAuth` check passes it as well. A v1 leaf under an intermediate CA is refused (a
//!   deviation; rare, since tools that make intermediates write v3).
//!
//! Version 3 certificates never come here: webpki verifies them as before.

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::{DigitallySignedStruct, Error};
use rustls_pki_types::{CertificateDer, SubjectPublicKeyInfoDer, UnixTime};
use x509_parser::prelude::{FromDer, X509Certificate, X509Version};

/// Whether `cert` parses as an X.509 v1 certificate.
pub(crate) fn is_v1(cert: &CertificateDer<'_>) -> bool {
    X509Certificate::from_der(cert).is_ok_and(|(_, parsed)| parsed.version() == X509Version::V1)
}

/// Checks the client's handshake signature `dss` over `message` with the public key of the v1
/// certificate `cert`, with any algorithm `algorithms` maps the signature scheme to (as rustls'
/// `verify_tls12_signature` tries them in turn); TLS 1.3 with rustls' check of a bare public key.
pub(crate) fn verify_handshake_signature(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
    algorithms: &WebPkiSupportedAlgorithms,
    tls13: bool,
) -> Result<HandshakeSignatureValid, Error> {
    let (_, parsed) = X509Certificate::from_der(cert)
        .map_err(|_| Error::InvalidCertificate(rustls::CertificateError::BadEncoding))?;
    if tls13 {
        // rustls' own check of a bare public key (RFC 7250), which refuses schemes TLS 1.3 forbids.
        let spki = SubjectPublicKeyInfoDer::from(parsed.public_key().raw);
        return rustls::crypto::verify_tls13_signature_with_raw_key(message, &spki, dss, algorithms);
    }
    let public_key = &parsed.public_key().subject_public_key.data;
    let candidates = algorithms
        .mapping
        .iter()
        .filter(|(scheme, _)| *scheme == dss.scheme)
        .flat_map(|(_, algs)| algs.iter());
    for alg in candidates {
        if alg.verify_signature(public_key, message, dss.signature()).is_ok() {
            return Ok(HandshakeSignatureValid::assertion());
        }
    }
    Err(Error::InvalidCertificate(rustls::CertificateError::BadSignature))
}

/// Whether the v1 certificate `leaf` was issued by one of `cas` (see the module docs) and it and its
/// issuer are valid at `now`.
pub(crate) fn issued_by_trusted_ca(
    leaf: &CertificateDer<'_>,
    cas: &[CertificateDer<'static>],
    now: UnixTime,
) -> bool {
    let Ok((_, leaf)) = X509Certificate::from_der(leaf) else {
        return false;
    };
    let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    let valid_at = |cert: &X509Certificate<'_>| {
        cert.validity().not_before.timestamp() <= now && now <= cert.validity().not_after.timestamp()
    };
    if leaf.version() != X509Version::V1 || !valid_at(&leaf) {
        return false;
    }
    cas.iter().any(|ca| {
        X509Certificate::from_der(ca).is_ok_and(|(_, ca)| {
            ca.subject().as_raw() == leaf.issuer().as_raw()
                && valid_at(&ca)
                && leaf.verify_signature(Some(ca.public_key())).is_ok()
        })
    })
}
