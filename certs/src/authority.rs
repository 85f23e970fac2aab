//! Certificate authorities and the certificates they issue.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
    IsCa, KeyPair, KeyUsagePurpose, SanType,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use time::{Duration, OffsetDateTime};

use crate::Result;

/// A certificate with its private key, in PEM and DER.
#[derive(Debug, Clone)]
pub struct KeyedCert {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The private key, PKCS#8 PEM.
    pub key_pem: String,
    cert_der: CertificateDer<'static>,
    key_der: Vec<u8>,
}

impl KeyedCert {
    fn new(cert_pem: String, cert_der: CertificateDer<'static>, key: &KeyPair) -> Self {
        Self {
            cert_pem,
            key_pem: key.serialize_pem(),
            cert_der,
            key_der: key.serialize_der(),
        }
    }

    /// The certificate, DER (for rustls).
    pub fn cert_der(&self) -> CertificateDer<'static> {
        self.cert_der.clone()
    }

    /// The private key, DER (for rustls).
    pub fn key_der(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()))
    }
}

/// A self-signed certificate authority that can issue serving and client certificates.
pub struct CertificateAuthority {
    issuer: CertifiedIssuer<'static, KeyPair>,
    keyed: KeyedCert,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority").finish_non_exhaustive()
    }
}

fn distinguished_name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    if let Some(organization) = organization {
        name.push(DnType::OrganizationName, organization);
    }
    name.push(DnType::CommonName, common_name);
    name
}

fn validity(params: &mut CertificateParams, days: i64) {
    let now = OffsetDateTime::now_utc();
    params.not_before = now - Duration::hours(1);
    params.not_after = now + Duration::days(days);
}

/// What a leaf certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// TLS server authentication.
    Server,
    /// TLS client authentication.
    Client,
}

impl CertificateAuthority {
    /// A new self-signed CA (ECDSA P-256, ten years) named `common_name`.
    pub fn new(common_name: &str) -> Result<Self> {
        let mut params = CertificateParams::default();
        params.distinguished_name = distinguished_name(common_name, None);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        validity(&mut params, 3650);
        let key = KeyPair::generate()?;
        let key_pem = key.serialize_pem();
        let key_der = key.serialize_der();
        let issuer = CertifiedIssuer::self_signed(params, key)?;
        let keyed = KeyedCert {
            cert_pem: issuer.pem(),
            key_pem,
            cert_der: issuer.der().clone(),
            key_der,
        };
        Ok(Self { issuer, keyed })
    }

    /// The CA certificate and key.
    pub fn keyed(&self) -> &KeyedCert {
        &self.keyed
    }

    /// Issues a leaf certificate (ECDSA P-256, one year). `names` become SANs: strings that parse as IP
    /// addresses become IP SANs, the rest DNS SANs. `organization` is the O (a Kubernetes group; rcgen
    /// keeps one O per name).
    pub fn issue(
        &self,
        common_name: &str,
        organization: Option<&str>,
        names: &[String],
        usage: Usage,
    ) -> Result<KeyedCert> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        for name in names {
            params.subject_alt_names.push(match name.parse() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(name.as_str().try_into()?),
            });
        }
        params.distinguished_name = distinguished_name(common_name, organization);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![match usage {
            Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        validity(&mut params, 365);
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(KeyedCert::new(cert.pem(), cert.der().clone(), &key))
    }
}
