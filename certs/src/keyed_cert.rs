//! A certificate together with its private key, in the two forms callers need: PEM for files and
//! kubeconfigs, DER for rustls.

use std::path::Path;

use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::{Error, Result};

/// A certificate and its private key (ECDSA P-256, PKCS#8).
///
/// Cloning is cheap enough for tests and server setup (a few hundred bytes each).
#[derive(Clone)]
pub struct KeyedCert {
    cert_pem: String,
    key_pem: String,
    cert_der: CertificateDer<'static>,
    key_der: Vec<u8>,
}

impl std::fmt::Debug for KeyedCert {
    // The private key stays out of logs and assertion messages.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedCert")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

impl KeyedCert {
    pub(crate) fn new(cert: &rcgen::Certificate, key: &rcgen::KeyPair) -> Self {
        Self {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().clone(),
            key_der: key.serialize_der(),
        }
    }

    /// The certificate, PEM (`-----BEGIN CERTIFICATE-----`), as written to `*.crt`.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The private key, PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), as written to `*.key`.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// The certificate, DER: what `rustls::RootCertStore::add` and `with_single_cert` take.
    pub fn cert_der(&self) -> CertificateDer<'static> {
        self.cert_der.clone()
    }

    /// The private key, DER (PKCS#8): what rustls' `with_single_cert`/`with_client_auth_cert` take.
    pub fn key_der(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()))
    }

    /// Writes the certificate to `cert` and the key to `key` (mode 0600 on unix), replacing existing
    /// files. Handy for an extra certificate a test hands to a client as file paths.
    pub fn write_to(&self, cert: &Path, key: &Path) -> Result<()> {
        std::fs::write(cert, &self.cert_pem).map_err(|source| Error::Io {
            path: cert.to_owned(),
            source,
        })?;
        write_private(key, &self.key_pem)
    }
}

/// Writes a file only its owner can read (private keys, kubeconfigs with embedded keys). The mode is
/// set before the contents are written, so the secret is never world-readable, even briefly.
pub(crate) fn write_private(path: &Path, contents: &str) -> Result<()> {
    use std::io::Write as _;

    let io = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(io)?;
    // `mode` applies to new files only; an existing file keeps its mode unless we narrow it.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(io)?;
    }
    file.write_all(contents.as_bytes()).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn private_files_are_owner_only_even_when_they_existed() {
        use std::os::unix::fs::PermissionsExt as _;

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.key");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&path, "new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn debug_output_hides_the_key() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::default().self_signed(&key).unwrap();
        let keyed = KeyedCert::new(&cert, &key);
        assert!(keyed.key_pem().contains("PRIVATE KEY"));
        assert!(!format!("{keyed:?}").contains("PRIVATE KEY"));
    }
}
