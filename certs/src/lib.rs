//! Cluster PKI for kube-mvp, laid out like kubeadm's `/etc/kubernetes/pki`, so the same folder can
//! configure the fake apiservers or a real kube-apiserver.
//!
//! One [`Pki`] holds the cluster CA (it signs serving and client certificates and is the peer CA of the
//! Mixed Version Proxy), one serving certificate per apiserver (its IPs plus `localhost`, `kubernetes`,
//! `kubernetes.default`, `kubernetes.default.svc`, `kubernetes.default.svc.cluster.local`), the
//! front-proxy (requestheader) CA and its client certificate, and an admin client certificate
//! (CN `admin`, O `system:masters`).
//!
//! ```no_run
//! # fn main() -> certs::Result<()> {
//! use certs::{Pki, PkiSpec, ServerSpec};
//!
//! let spec = PkiSpec {
//!     servers: vec![ServerSpec { name: "a".into(), ips: vec!["127.0.0.1".parse().unwrap()], dns: vec![] }],
//!     ..PkiSpec::default()
//! };
//! let pki = Pki::generate(&spec)?;
//! let paths = pki.write_to(std::path::Path::new("pki"))?;
//! pki.write_kubeconfig(&paths.kubeconfig("a"), "https://127.0.0.1:6443", "a")?;
//! # Ok(()) }
//! ```

mod authority;
mod error;
mod kubeconfig;
mod pki;

pub use authority::{CertificateAuthority, KeyedCert, Usage};
pub use error::{Error, Result};
pub use kubeconfig::render as render_kubeconfig;
pub use pki::{APISERVER_DNS_NAMES, Pki, PkiPaths, PkiSpec, ServerSpec, Signer};
