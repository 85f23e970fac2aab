//! A whole cluster PKI: what it contains, how it is generated and where it is written.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::authority::{CertificateAuthority, KeyedCert, Usage};
use crate::{Error, Result, kubeconfig};

/// DNS names every apiserver serving certificate carries, as kubeadm issues them. Peers verify each
/// other against `kubernetes.default.svc` (the Mixed Version Proxy's fixed server name).
pub const APISERVER_DNS_NAMES: [&str; 5] = [
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// One apiserver of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// Short name; files are `apiserver-<name>.crt/.key` and `<name>.kubeconfig`.
    pub name: String,
    /// Its IP addresses (IP SANs).
    pub ips: Vec<IpAddr>,
    /// Extra DNS SANs beyond [`APISERVER_DNS_NAMES`].
    pub dns: Vec<String>,
}

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PkiSpec {
    /// The apiservers, one serving certificate each.
    pub servers: Vec<ServerSpec>,
    /// CN of the front-proxy (requestheader) client certificate the proxy presents to peers.
    pub front_proxy_client_cn: String,
}

impl Default for PkiSpec {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            front_proxy_client_cn: "front-proxy-client".to_owned(),
        }
    }
}

/// Which CA signs an extra client certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signer {
    /// The cluster CA (`ca.crt`): ordinary x509 client authentication.
    ClusterCa,
    /// The front-proxy CA (`front-proxy-ca.crt`): requestheader authentication.
    FrontProxyCa,
}

/// A generated cluster PKI, in memory.
#[derive(Debug)]
pub struct Pki {
    ca: CertificateAuthority,
    front_proxy_ca: CertificateAuthority,
    front_proxy_client: KeyedCert,
    admin: KeyedCert,
    servers: BTreeMap<String, KeyedCert>,
}

/// Where [`Pki::write_to`] put each file (kubeadm's names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PkiPaths {
    /// The folder.
    pub dir: PathBuf,
    /// `ca.crt`: the cluster CA, also the peer CA (`--peer-ca-file`) and `--client-ca-file`.
    pub ca_cert: PathBuf,
    /// `ca.key`.
    pub ca_key: PathBuf,
    /// `front-proxy-ca.crt` (`--requestheader-client-ca-file`).
    pub front_proxy_ca_cert: PathBuf,
    /// `front-proxy-ca.key`.
    pub front_proxy_ca_key: PathBuf,
    /// `front-proxy-client.crt` (`--proxy-client-cert-file`).
    pub front_proxy_client_cert: PathBuf,
    /// `front-proxy-client.key` (`--proxy-client-key-file`).
    pub front_proxy_client_key: PathBuf,
    /// `admin.crt` (CN `admin`, O `system:masters`).
    pub admin_cert: PathBuf,
    /// `admin.key`.
    pub admin_key: PathBuf,
}

impl PkiPaths {
    fn new(dir: &Path) -> Self {
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
        }
    }

    /// `apiserver-<name>.crt` (`--tls-cert-file`). kubeadm's single server uses `apiserver.crt`.
    pub fn server_cert(&self, name: &str) -> PathBuf {
        self.dir.join(format!("apiserver-{name}.crt"))
    }

    /// `apiserver-<name>.key` (`--tls-private-key-file`).
    pub fn server_key(&self, name: &str) -> PathBuf {
        self.dir.join(format!("apiserver-{name}.key"))
    }

    /// `<name>.kubeconfig`.
    pub fn kubeconfig(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.kubeconfig"))
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

impl Pki {
    /// Generates the cluster CA, the front-proxy CA and client, the admin client and one serving
    /// certificate per server.
    pub fn generate(spec: &PkiSpec) -> Result<Self> {
        if spec.servers.is_empty() {
            return Err(Error::InvalidServerSpec(
                "at least one server is required".to_owned(),
            ));
        }
        let mut servers = BTreeMap::new();
        let ca = CertificateAuthority::new("kubernetes")?;
        for server in &spec.servers {
            if !valid_name(&server.name) {
                return Err(Error::InvalidServerSpec(format!(
                    "server name {:?} must be a DNS label (lower-case letters, digits, '-')",
                    server.name
                )));
            }
            if servers.contains_key(&server.name) {
                return Err(Error::InvalidServerSpec(format!(
                    "duplicate server name {:?}",
                    server.name
                )));
            }
            let names: Vec<String> = server
                .ips
                .iter()
                .map(ToString::to_string)
                .chain(APISERVER_DNS_NAMES.iter().map(|n| (*n).to_owned()))
                .chain(server.dns.iter().cloned())
                .collect();
            servers.insert(
                server.name.clone(),
                ca.issue("kube-apiserver", None, &names, Usage::Server)?,
            );
        }
        let front_proxy_ca = CertificateAuthority::new("front-proxy-ca")?;
        let front_proxy_client =
            front_proxy_ca.issue(&spec.front_proxy_client_cn, None, &[], Usage::Client)?;
        let admin = ca.issue("admin", Some("system:masters"), &[], Usage::Client)?;
        Ok(Self {
            ca,
            front_proxy_ca,
            front_proxy_client,
            admin,
            servers,
        })
    }

    /// The cluster CA.
    pub fn ca(&self) -> &KeyedCert {
        self.ca.keyed()
    }

    /// The front-proxy (requestheader) CA.
    pub fn front_proxy_ca(&self) -> &KeyedCert {
        self.front_proxy_ca.keyed()
    }

    /// The front-proxy client certificate the proxy presents.
    pub fn front_proxy_client(&self) -> &KeyedCert {
        &self.front_proxy_client
    }

    /// The admin client certificate.
    pub fn admin(&self) -> &KeyedCert {
        &self.admin
    }

    /// The serving certificate of server `name`.
    pub fn server(&self, name: &str) -> Result<&KeyedCert> {
        self.servers
            .get(name)
            .ok_or_else(|| Error::UnknownServer(name.to_owned()))
    }

    /// Issues one more client certificate (tests: a proxy certificate with another CN, a user with a
    /// group).
    pub fn issue_client_cert(
        &self,
        signer: Signer,
        common_name: &str,
        group: Option<&str>,
    ) -> Result<KeyedCert> {
        let ca = match signer {
            Signer::ClusterCa => &self.ca,
            Signer::FrontProxyCa => &self.front_proxy_ca,
        };
        ca.issue(common_name, group, &[], Usage::Client)
    }

    /// Writes every certificate and key into `dir` (created if missing) with kubeadm's names; keys are
    /// readable by the owner only. Kubeconfigs need a server URL, see [`Pki::write_kubeconfig`].
    pub fn write_to(&self, dir: &Path) -> Result<PkiPaths> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            path: dir.to_owned(),
            source,
        })?;
        let paths = PkiPaths::new(dir);
        let pairs = [
            (self.ca(), &paths.ca_cert, &paths.ca_key),
            (
                self.front_proxy_ca(),
                &paths.front_proxy_ca_cert,
                &paths.front_proxy_ca_key,
            ),
            (
                &self.front_proxy_client,
                &paths.front_proxy_client_cert,
                &paths.front_proxy_client_key,
            ),
            (&self.admin, &paths.admin_cert, &paths.admin_key),
        ];
        for (keyed, cert, key) in pairs {
            write_pair(keyed, cert, key)?;
        }
        for (name, keyed) in &self.servers {
            write_pair(keyed, &paths.server_cert(name), &paths.server_key(name))?;
        }
        Ok(paths)
    }

    /// Writes the PKI into a new temporary directory, removed when the returned guard drops.
    pub fn write_to_tempdir(&self) -> Result<(tempfile::TempDir, PkiPaths)> {
        let dir = tempfile::tempdir().map_err(|source| Error::Io {
            path: std::env::temp_dir(),
            source,
        })?;
        let paths = self.write_to(dir.path())?;
        Ok((dir, paths))
    }

    /// Writes an admin kubeconfig for `server_url` to `path`; `name` names its cluster and context.
    pub fn write_kubeconfig(&self, path: &Path, server_url: &str, name: &str) -> Result<()> {
        let text = kubeconfig::render(
            name,
            server_url,
            &self.ca().cert_pem,
            &self.admin.cert_pem,
            &self.admin.key_pem,
        );
        write_private(path, &text)
    }
}

fn write_pair(keyed: &KeyedCert, cert: &Path, key: &Path) -> Result<()> {
    std::fs::write(cert, &keyed.cert_pem).map_err(|source| Error::Io {
        path: cert.to_owned(),
        source,
    })?;
    write_private(key, &keyed.key_pem)
}

fn write_private(path: &Path, contents: &str) -> Result<()> {
    let io = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    std::fs::write(path, contents).map_err(io)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    }
    Ok(())
}
