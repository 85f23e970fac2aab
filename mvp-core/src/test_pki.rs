//! Throw-away PKI for unit tests (cluster CA, front-proxy CA, serving and client certs), issued by the
//! workspace's `certs` crate.

use certs::CertificateAuthority;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// What a test leaf certificate is for.
#[derive(Clone, Copy)]
pub(crate) enum Eku {
    ServerAuth,
    ClientAuth,
}

fn ca(cn: &str) -> CertificateAuthority {
    CertificateAuthority::new_self_signed(cn).unwrap()
}

fn leaf(
    issuer: &CertificateAuthority,
    cn: &str,
    sans: &[&str],
    eku: Eku,
) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let keyed = match eku {
        Eku::ClientAuth => issuer.issue_client_cert(cn, &[]).unwrap(),
        Eku::ServerAuth => {
            let ips: Vec<std::net::IpAddr> = sans.iter().filter_map(|s| s.parse().ok()).collect();
            let dns: Vec<String> = sans
                .iter()
                .filter(|s| s.parse::<std::net::IpAddr>().is_err())
                .map(|s| (*s).to_owned())
                .collect();
            issuer.issue_serving_cert(cn, &ips, &dns).unwrap()
        }
    };
    (vec![keyed.cert_der()], keyed.key_der())
}

/// A cluster CA and a front-proxy CA.
pub(crate) struct TestPki {
    pub(crate) cluster_ca: CertificateAuthority,
    pub(crate) front_proxy_ca: CertificateAuthority,
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
        leaf(&self.front_proxy_ca, cn, &[], Eku::ClientAuth)
    }

    /// A client certificate chain signed by the cluster CA.
    pub(crate) fn cluster_client_chain(&self, cn: &str) -> Vec<CertificateDer<'static>> {
        leaf(&self.cluster_ca, cn, &[], Eku::ClientAuth).0
    }

    /// A serving certificate signed by the cluster CA with SANs `kubernetes.default.svc`,
    /// `localhost` and 127.0.0.1.
    #[allow(dead_code)]
    pub(crate) fn serving(&self) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        leaf(
            &self.cluster_ca,
            "kube-apiserver",
            &["kubernetes.default.svc", "localhost", "127.0.0.1"],
            Eku::ServerAuth,
        )
    }
}
