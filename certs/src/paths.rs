//! Where a written PKI lives: kubeadm's file names in one folder.

use std::path::{Path, PathBuf};

/// The files [`crate::Pki::write_to`] writes, named as kubeadm names them in `/etc/kubernetes/pki`.
///
/// kubeadm has one serving certificate, `apiserver.crt`; a cluster here has several apiservers, so
/// each gets `apiserver-<name>.crt/.key` ([`PkiPaths::server_cert`]). Kubeconfigs are
/// `<name>.kubeconfig` ([`PkiPaths::kubeconfig`]), written by [`crate::Pki::write_kubeconfig`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PkiPaths {
    /// The folder holding every file.
    pub dir: PathBuf,
    /// `ca.crt`: the cluster CA, for `--client-ca-file` and as the peer CA (`--peer-ca-file`).
    pub ca_cert: PathBuf,
    /// `ca.key`.
    pub ca_key: PathBuf,
    /// `front-proxy-ca.crt`, for `--requestheader-client-ca-file`.
    pub front_proxy_ca_cert: PathBuf,
    /// `front-proxy-ca.key`.
    pub front_proxy_ca_key: PathBuf,
    /// `front-proxy-client.crt`, for `--proxy-client-cert-file`.
    pub front_proxy_client_cert: PathBuf,
    /// `front-proxy-client.key`, for `--proxy-client-key-file`.
    pub front_proxy_client_key: PathBuf,
    /// `admin.crt` (CN `admin`, O `system:masters`).
    pub admin_cert: PathBuf,
    /// `admin.key`.
    pub admin_key: PathBuf,
    /// `sa.key`: the service-account signing key, for `--service-account-signing-key-file`.
    pub service_account_key: PathBuf,
    /// `sa.pub`: its public key, for `--service-account-key-file`.
    pub service_account_pub: PathBuf,
}

impl PkiPaths {
    /// The paths inside `dir` (nothing is read or written).
    pub fn new(dir: &Path) -> Self {
        let at = |name: &str| dir.join(name);
        Self {
            dir: dir.to_owned(),
            ca_cert: at("ca.crt"),
            ca_key: at("ca.key"),
            front_proxy_ca_cert: at("front-proxy-ca.crt"),
            front_proxy_ca_key: at("front-proxy-ca.key"),
            front_proxy_client_cert: at("front-proxy-client.crt"),
            front_proxy_client_key: at("front-proxy-client.key"),
            admin_cert: at("admin.crt"),
            admin_key: at("admin.key"),
            service_account_key: at("sa.key"),
            service_account_pub: at("sa.pub"),
        }
    }

    /// `apiserver-<name>.crt`, for that server's `--tls-cert-file`.
    pub fn server_cert(&self, name: &str) -> PathBuf {
        self.dir.join(format!("apiserver-{name}.crt"))
    }

    /// `apiserver-<name>.key`, for that server's `--tls-private-key-file`.
    pub fn server_key(&self, name: &str) -> PathBuf {
        self.dir.join(format!("apiserver-{name}.key"))
    }

    /// `<name>.kubeconfig`: the admin kubeconfig pointing at that server.
    pub fn kubeconfig(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.kubeconfig"))
    }
}
