//! Throw-away PKI for unit tests (cluster CA, front-proxy CA, serving and client certs).

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
    IsCa, KeyPair, KeyUsagePurpose,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A cluster CA and a front-proxy CA.
pub(crate) struct TestPki {
    pub(crate) cluster_ca: CertifiedIssuer<'static, KeyPair>,
    pub(crate) front_proxy_ca: CertifiedIssuer<'static, KeyPair>,
}

fn ca(cn: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut p = CertificateParams::default();
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
}

fn leaf(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    cn: &str,
    sans: &[&str],
    eku: ExtendedKeyUsagePurpose,
) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let mut p = CertificateParams::new(sans.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()).unwrap();
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.extended_key_usages = vec![eku];
    p.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, issuer).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    (vec![cert.der().clone()], key)
}

impl TestPki {
    pub(crate) fn new() -> Self {
        Self {
            cluster_ca: ca("kubernetes"),
            front_proxy_ca: ca("front-proxy-ca"),
        }
    }

    /// A front-proxy client certificate chain with CN `cn`.
    pub(crate) fn front_proxy_client_chain(&self, cn: &str) -> Vec<CertificateDer<'static>> {
        self.front_proxy_client(cn).0
    }

    /// A front-proxy client certificate and key with CN `cn`.
    pub(crate) fn front_proxy_client(
        &self,
        cn: &str,
    ) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        leaf(&self.front_proxy_ca, cn, &[], ExtendedKeyUsagePurpose::ClientAuth)
    }

    /// A client certificate chain signed by the cluster CA.
    pub(crate) fn cluster_client_chain(&self, cn: &str) -> Vec<CertificateDer<'static>> {
        leaf(&self.cluster_ca, cn, &[], ExtendedKeyUsagePurpose::ClientAuth).0
    }

    /// A serving certificate signed by the cluster CA with SANs `kubernetes.default.svc`,
    /// `localhost` and 127.0.0.1.
    #[allow(dead_code)]
    pub(crate) fn serving(&self) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        leaf(
            &self.cluster_ca,
            "kube-apiserver",
            &["kubernetes.default.svc", "localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }
}
