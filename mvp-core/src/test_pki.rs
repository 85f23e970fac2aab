//! Throw-away PKI for tests: self-signed CAs and the leaf certificates they issue, made with rcgen
//! (a published crate, so the tests also build from the published package). Unit tests use it as
//! `crate::test_pki`; the integration tests include this file.
#![allow(dead_code)]

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
    IsCa, KeyPair, KeyUsagePurpose, SanType,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A certificate chain and its key, as rustls takes them.
pub(crate) type Leaf = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// A self-signed CA.
pub(crate) struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestCa {
    /// A CA named `cn`.
    pub(crate) fn new(cn: &str) -> Self {
        let mut params = CertificateParams::default();
        params.distinguished_name = subject(cn, &[]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("key");
        Self {
            issuer: CertifiedIssuer::self_signed(params, key).expect("CA"),
        }
    }

    /// The CA certificate.
    pub(crate) fn cert_der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }

    /// A client certificate (EKU clientAuth) for user `cn` in `groups` (each an `O=`).
    pub(crate) fn client(&self, cn: &str, groups: &[&str]) -> Leaf {
        self.issue(subject(cn, groups), ExtendedKeyUsagePurpose::ClientAuth, &[])
    }

    /// A serving certificate (EKU serverAuth) for `sans` (IP addresses or DNS names).
    pub(crate) fn serving(&self, cn: &str, sans: &[&str]) -> Leaf {
        self.issue(subject(cn, &[]), ExtendedKeyUsagePurpose::ServerAuth, sans)
    }

    fn issue(&self, subject: DistinguishedName, usage: ExtendedKeyUsagePurpose, sans: &[&str]) -> Leaf {
        let mut params = CertificateParams::default();
        params.distinguished_name = subject;
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![usage];
        for san in sans {
            params.subject_alt_names.push(match san.parse() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName((*san).try_into().expect("ASCII DNS name")),
            });
        }
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("certificate");
        let key = PrivatePkcs8KeyDer::from(key.serialize_der());
        (vec![cert.der().clone()], key.into())
    }
}

fn subject(cn: &str, groups: &[&str]) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    for group in groups {
        name.push(DnType::OrganizationName, *group);
    }
    name.push(DnType::CommonName, cn);
    name
}

/// A cluster CA and a front-proxy CA, as kubeadm's PKI has them.
pub(crate) struct TestPki {
    pub(crate) cluster_ca: TestCa,
    pub(crate) front_proxy_ca: TestCa,
}

impl TestPki {
    pub(crate) fn new() -> Self {
        Self {
            cluster_ca: TestCa::new("kubernetes"),
            front_proxy_ca: TestCa::new("front-proxy-ca"),
        }
    }

    /// A front-proxy client certificate chain with CN `cn`.
    pub(crate) fn front_proxy_client_chain(&self, cn: &str) -> Vec<CertificateDer<'static>> {
        self.front_proxy_client(cn).0
    }

    /// A front-proxy client certificate and key with CN `cn`.
    pub(crate) fn front_proxy_client(&self, cn: &str) -> Leaf {
        self.front_proxy_ca.client(cn, &[])
    }

    /// A client certificate chain signed by the cluster CA.
    pub(crate) fn cluster_client_chain(&self, cn: &str) -> Vec<CertificateDer<'static>> {
        self.cluster_ca.client(cn, &[]).0
    }
}
