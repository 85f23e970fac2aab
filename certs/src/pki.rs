//! A whole cluster PKI: generated in memory from a [`PkiSpec`], written in kubeadm's layout.

use std::path::Path;

use crate::keyed_cert::write_private;
use crate::{
    CertificateAuthority, Error, KeyedCert, PkiPaths, PkiSpec, Result, ServiceAccountKey, render_kubeconfig,
};

/// CN of the cluster CA (kubeadm's).
const CA_CN: &str = "kubernetes";
/// CN of the front-proxy CA (kubeadm's).
const FRONT_PROXY_CA_CN: &str = "front-proxy-ca";
/// CN of every apiserver serving certificate (kubeadm's).
const APISERVER_CN: &str = "kube-apiserver";
/// The admin user and its group: `system:masters` is bound to `cluster-admin` in every cluster.
const ADMIN_CN: &str = "admin";
const ADMIN_GROUP: &str = "system:masters";

/// Which CA of a [`Pki`] signs a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Issuer {
    /// The cluster CA (`ca.crt`): certificates for ordinary x509 client authentication.
    ClusterCa,
    /// The front-proxy CA (`front-proxy-ca.crt`): certificates that may assert
    /// `X-Remote-User`/`X-Remote-Group` (requestheader authentication), if their CN is allowed.
    FrontProxyCa,
}

/// A generated cluster PKI, in memory: the cluster CA, the front-proxy CA and client, the admin
/// client, and one serving certificate per apiserver.
#[derive(Debug)]
pub struct Pki {
    ca: CertificateAuthority,
    front_proxy_ca: CertificateAuthority,
    front_proxy_client: KeyedCert,
    admin: KeyedCert,
    /// In [`PkiSpec::servers`] order.
    servers: Vec<(String, KeyedCert)>,
    service_account: ServiceAccountKey,
}

impl Pki {
    /// Generates every certificate for `spec` (fresh ECDSA P-256 keys each time).
    ///
    /// Serving certificates (CN `kube-apiserver`, EKU serverAuth) carry the server's IPs,
    /// [`crate::APISERVER_DNS_NAMES`] and its extra DNS names. Fails with
    /// [`Error::InvalidServerSpec`] when [`PkiSpec::validate`] does.
    pub fn generate(spec: &PkiSpec) -> Result<Self> {
        spec.validate()?;
        let ca = CertificateAuthority::new_self_signed(CA_CN)?;
        let servers = spec
            .servers
            .iter()
            .map(|server| {
                let cert = ca.issue_serving_cert(APISERVER_CN, &server.ips, &server.dns_names())?;
                Ok((server.name.clone(), cert))
            })
            .collect::<Result<_>>()?;
        let front_proxy_ca = CertificateAuthority::new_self_signed(FRONT_PROXY_CA_CN)?;
        let front_proxy_client = front_proxy_ca.issue_client_cert(&spec.front_proxy_client_cn, &[])?;
        let admin = ca.issue_client_cert(ADMIN_CN, &[ADMIN_GROUP])?;
        Ok(Self {
            ca,
            front_proxy_ca,
            front_proxy_client,
            admin,
            servers,
            service_account: ServiceAccountKey::generate()?,
        })
    }

    /// The service-account key pair (`sa.key`/`sa.pub`).
    pub fn service_account_key(&self) -> &ServiceAccountKey {
        &self.service_account
    }

    /// The cluster CA certificate and key: trust it to verify servers, peers and ordinary clients.
    pub fn ca(&self) -> &KeyedCert {
        self.ca.cert()
    }

    /// The front-proxy (requestheader) CA certificate and key.
    pub fn front_proxy_ca(&self) -> &KeyedCert {
        self.front_proxy_ca.cert()
    }

    /// The front-proxy client certificate (EKU clientAuth, no groups) the proxy presents to peers.
    pub fn front_proxy_client(&self) -> &KeyedCert {
        &self.front_proxy_client
    }

    /// The admin client certificate (CN `admin`, O `system:masters`, EKU clientAuth).
    pub fn admin(&self) -> &KeyedCert {
        &self.admin
    }

    /// The serving certificate of server `name`, if the spec had it.
    pub fn server(&self, name: &str) -> Option<&KeyedCert> {
        self.servers.iter().find(|(n, _)| n == name).map(|(_, cert)| cert)
    }

    /// Every server's name and serving certificate, in spec order.
    pub fn servers(&self) -> impl Iterator<Item = (&str, &KeyedCert)> {
        self.servers.iter().map(|(name, cert)| (name.as_str(), cert))
    }

    /// One of the two CAs, to issue further certificates of any kind.
    pub fn authority(&self, issuer: Issuer) -> &CertificateAuthority {
        match issuer {
            Issuer::ClusterCa => &self.ca,
            Issuer::FrontProxyCa => &self.front_proxy_ca,
        }
    }

    /// Issues one more client certificate for user `common_name` in `groups` (at most
    /// [`crate::MAX_GROUPS`]), signed by `issuer`: e.g. a front-proxy certificate with a CN that
    /// `--requestheader-allowed-names` does not list, or a second user.
    pub fn issue_client_cert(&self, issuer: Issuer, common_name: &str, groups: &[&str]) -> Result<KeyedCert> {
        self.authority(issuer).issue_client_cert(common_name, groups)
    }

    /// Writes every certificate and key into `dir` (created if missing) with kubeadm's names (see
    /// [`PkiPaths`]), replacing existing files; keys are mode 0600 on unix. Kubeconfigs need a server
    /// URL, so they are written separately by [`Pki::write_kubeconfig`].
    pub fn write_to(&self, dir: &Path) -> Result<PkiPaths> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            path: dir.to_owned(),
            source,
        })?;
        let paths = PkiPaths::new(dir);
        self.ca().write_to(&paths.ca_cert, &paths.ca_key)?;
        self.front_proxy_ca()
            .write_to(&paths.front_proxy_ca_cert, &paths.front_proxy_ca_key)?;
        self.front_proxy_client
            .write_to(&paths.front_proxy_client_cert, &paths.front_proxy_client_key)?;
        self.admin.write_to(&paths.admin_cert, &paths.admin_key)?;
        for (name, cert) in self.servers() {
            cert.write_to(&paths.server_cert(name), &paths.server_key(name))?;
        }
        write_private(&paths.service_account_key, self.service_account.private_key_pem())?;
        std::fs::write(&paths.service_account_pub, self.service_account.public_key_pem()).map_err(
            |source| Error::Io {
                path: paths.service_account_pub.clone(),
                source,
            },
        )?;
        Ok(paths)
    }

    /// Writes the PKI into a new temporary directory, deleted when the returned guard drops (keep it
    /// alive as long as anything reads the files).
    pub fn write_to_tempdir(&self) -> Result<(tempfile::TempDir, PkiPaths)> {
        let dir = tempfile::tempdir().map_err(|source| Error::Io {
            path: std::env::temp_dir(),
            source,
        })?;
        let paths = self.write_to(dir.path())?;
        Ok((dir, paths))
    }

    /// The admin kubeconfig for `server_url` (e.g. `https://127.0.0.1:6443`, see
    /// [`crate::ServerSpec::url`]), trusting the cluster CA. `name` names its cluster; the context and
    /// user are `admin@<name>`.
    pub fn kubeconfig(&self, server_url: &str, name: &str) -> String {
        render_kubeconfig(name, server_url, self.ca(), &self.admin)
    }

    /// Writes [`Pki::kubeconfig`] to `path` (mode 0600 on unix: it embeds the admin key), replacing
    /// an existing file, so it can be rewritten once a server's port is known.
    pub fn write_kubeconfig(&self, path: &Path, server_url: &str, name: &str) -> Result<()> {
        write_private(path, &self.kubeconfig(server_url, name))
    }
}
