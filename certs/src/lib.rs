//! Cluster PKI for kube-mvp, laid out like kubeadm's `/etc/kubernetes/pki`, so one folder configures
//! the fake apiservers or a real kube-apiserver.
//!
//! A [`Pki`] holds:
//! * the cluster CA (`ca.crt`/`ca.key`): it signs serving and client certificates and is the peer CA
//!   of the Mixed Version Proxy;
//! * one serving certificate per apiserver (`apiserver-<name>.crt/.key`; kubeadm's single server has
//!   `apiserver.crt`): CN `kube-apiserver`, EKU serverAuth, SANs its IPs plus
//!   [`APISERVER_DNS_NAMES`] (`localhost`, `kubernetes`, ..., `kubernetes.default.svc.cluster.local`);
//! * the front-proxy (requestheader) CA (`front-proxy-ca.crt/.key`) and its client certificate
//!   (`front-proxy-client.crt/.key`, CN configurable);
//! * an admin client certificate (`admin.crt/.key`: CN `admin`, O `system:masters`), which the
//!   per-server kubeconfigs (`<name>.kubeconfig`) embed;
//! * the service-account key pair (`sa.key`/`sa.pub`, [`ServiceAccountKey`]) that signs and verifies
//!   ServiceAccount tokens.
//!
//! Keys are ECDSA P-256 in PKCS#8 PEM, written with mode 0600. CAs are valid for ten years, leaf
//! certificates for one, both from an hour ago. Every certificate is available as PEM and as rustls
//! DER through [`KeyedCert`].
//!
//! ```no_run
//! # fn main() -> certs::Result<()> {
//! use certs::{Issuer, Pki, PkiSpec, ServerSpec};
//!
//! let a = ServerSpec::new("a", ["127.0.0.1".parse().unwrap()]);
//! let url = a.url(6443);
//! let pki = Pki::generate(&PkiSpec::new([a]))?;
//! let (_guard, paths) = pki.write_to_tempdir()?;
//! pki.write_kubeconfig(&paths.kubeconfig("a"), &url, "a")?;
//!
//! // rustls material, and a client certificate a server should not accept as a front proxy.
//! let _root = pki.ca().cert_der();
//! let _intruder = pki.issue_client_cert(Issuer::FrontProxyCa, "not-allowed", &["devs"])?;
//! # Ok(()) }
//! ```
#![warn(unreachable_pub)]

mod authority;
mod error;
mod keyed_cert;
mod kubeconfig;
mod paths;
mod pki;
mod service_account;
mod spec;

pub use authority::{CertificateAuthority, MAX_GROUPS};
pub use error::{Error, Result};
pub use keyed_cert::KeyedCert;
pub use kubeconfig::render_kubeconfig;
pub use paths::PkiPaths;
pub use pki::{Issuer, Pki};
pub use service_account::{ServiceAccountKey, TokenAlgorithm};
pub use spec::{APISERVER_DNS_NAMES, DEFAULT_FRONT_PROXY_CLIENT_CN, PkiSpec, ServerSpec};
