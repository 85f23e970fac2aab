//! The service-account key pair (kubeadm's `sa.key`/`sa.pub`): kube-apiserver signs ServiceAccount
//! tokens with the private key (`--service-account-signing-key-file`) and verifies them with the public
//! one (`--service-account-key-file`).

use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256, PKCS_ECDSA_P384_SHA384, PKCS_RSA_SHA256, PublicKeyData as _};

use crate::Result;

/// The JWS algorithm a service-account key signs with, as kube-apiserver chooses it from the key type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenAlgorithm {
    /// RSA keys: `RS256`.
    Rs256,
    /// ECDSA P-256 keys: `ES256`.
    Es256,
    /// ECDSA P-384 keys: `ES384`.
    Es384,
}

/// A service-account key pair.
///
/// Generated keys are ECDSA P-256 like the rest of this PKI (kubeadm's `encryptionAlgorithm:
/// ECDSA-P256`), so tokens are `ES256`; [`ServiceAccountKey::from_pem`] also reads RSA keys
/// (kubeadm's default), whose tokens are `RS256`.
#[derive(Debug)]
pub struct ServiceAccountKey {
    key: KeyPair,
    private_pem: String,
}

impl ServiceAccountKey {
    /// A fresh ECDSA P-256 key pair.
    pub fn generate() -> Result<Self> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let private_pem = key.serialize_pem();
        Ok(Self { key, private_pem })
    }

    /// Reads a private key in PEM (PKCS#8; RSA also PKCS#1, kubeadm's `RSA PRIVATE KEY`).
    pub fn from_pem(pem: &str) -> Result<Self> {
        let key = match pkcs1_body(pem) {
            Some(pkcs1) => KeyPair::try_from(pkcs1_to_pkcs8(&pkcs1).as_slice())?,
            None => KeyPair::from_pem(pem)?,
        };
        Ok(Self {
            key,
            private_pem: pem.to_owned(),
        })
    }

    /// The private key, PEM (`sa.key`).
    pub fn private_key_pem(&self) -> &str {
        &self.private_pem
    }

    /// The public key, PKIX `PUBLIC KEY` PEM (`sa.pub`).
    pub fn public_key_pem(&self) -> String {
        self.key.public_key_pem()
    }

    /// The public key, PKIX DER (what kube-apiserver hashes into the `kid` of its tokens).
    pub fn public_key_der(&self) -> Vec<u8> {
        self.key.subject_public_key_info()
    }

    /// The JWS algorithm of the key, `None` for key types kube-apiserver does not sign with.
    pub fn algorithm(&self) -> Option<TokenAlgorithm> {
        let algorithm = self.key.algorithm();
        if algorithm == &PKCS_RSA_SHA256 {
            Some(TokenAlgorithm::Rs256)
        } else if algorithm == &PKCS_ECDSA_P256_SHA256 {
            Some(TokenAlgorithm::Es256)
        } else if algorithm == &PKCS_ECDSA_P384_SHA384 {
            Some(TokenAlgorithm::Es384)
        } else {
            None
        }
    }
}

/// The DER of a PKCS#1 `RSA PRIVATE KEY` PEM block, if that is what `pem` holds.
fn pkcs1_body(pem: &str) -> Option<Vec<u8>> {
    let start = pem.find("-----BEGIN RSA PRIVATE KEY-----")?;
    let body: String = pem[start..]
        .lines()
        .skip(1)
        .take_while(|line| !line.starts_with("-----END"))
        .map(str::trim)
        .collect();
    data_encoding::BASE64.decode(body.as_bytes()).ok()
}

/// DER length octets.
fn der_length(length: usize) -> Vec<u8> {
    if length < 0x80 {
        return vec![length as u8];
    }
    let bytes: Vec<u8> = length.to_be_bytes().into_iter().skip_while(|b| *b == 0).collect();
    let mut out = vec![0x80 | bytes.len() as u8];
    out.extend(bytes);
    out
}

/// Wraps a PKCS#1 RSA key in PKCS#8 (`PrivateKeyInfo` with the `rsaEncryption` algorithm).
fn pkcs1_to_pkcs8(pkcs1: &[u8]) -> Vec<u8> {
    // version 0, AlgorithmIdentifier { rsaEncryption, NULL }
    const PREFIX: &[u8] = &[
        0x02, 0x01, 0x00, 0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05,
        0x00,
    ];
    let mut octets = vec![0x04];
    octets.extend(der_length(pkcs1.len()));
    octets.extend_from_slice(pkcs1);
    let mut body = PREFIX.to_vec();
    body.extend(octets);
    let mut out = vec![0x30];
    out.extend(der_length(body.len()));
    out.extend(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_is_p256_and_reads_back() {
        let key = ServiceAccountKey::generate().unwrap();
        assert_eq!(key.algorithm(), Some(TokenAlgorithm::Es256));
        assert!(key.private_key_pem().starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(key.public_key_pem().starts_with("-----BEGIN PUBLIC KEY-----"));
        let again = ServiceAccountKey::from_pem(key.private_key_pem()).unwrap();
        assert_eq!(again.public_key_der(), key.public_key_der());
    }
}
