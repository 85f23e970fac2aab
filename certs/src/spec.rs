//! What a cluster PKI should contain: the apiservers and the front-proxy client's name.

use std::collections::BTreeSet;
use std::net::IpAddr;

use crate::{Error, Result};

/// DNS names every apiserver serving certificate carries, as kubeadm issues them. Peers of the
/// Mixed Version Proxy verify each other against `kubernetes.default.svc`.
pub const APISERVER_DNS_NAMES: [&str; 5] = [
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// CN of the front-proxy client certificate unless [`PkiSpec::front_proxy_client_cn`] says
/// otherwise (kubeadm's name, and what `--requestheader-allowed-names` usually lists).
pub const DEFAULT_FRONT_PROXY_CLIENT_CN: &str = "front-proxy-client";

/// One apiserver of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// Short name, a DNS label (`[a-z0-9-]`, at most 63 characters). Files are
    /// `apiserver-<name>.crt/.key` and `<name>.kubeconfig`.
    pub name: String,
    /// Its IP addresses, each an IP SAN. `127.0.0.1` is not added unless listed here.
    pub ips: Vec<IpAddr>,
    /// Extra DNS SANs beyond [`APISERVER_DNS_NAMES`] (e.g. a container name).
    pub dns: Vec<String>,
}

impl ServerSpec {
    /// A server named `name` reachable at `ips`, with no extra DNS names.
    pub fn new(name: impl Into<String>, ips: impl IntoIterator<Item = IpAddr>) -> Self {
        Self {
            name: name.into(),
            ips: ips.into_iter().collect(),
            dns: Vec::new(),
        }
    }

    /// Adds an extra DNS SAN.
    pub fn with_dns(mut self, name: impl Into<String>) -> Self {
        self.dns.push(name.into());
        self
    }

    /// `https://<first IP>:<port>` (IPv6 in brackets), or `https://localhost:<port>` for a server
    /// without IPs: the URL its kubeconfig points at.
    pub fn url(&self, port: u16) -> String {
        match self.ips.first() {
            Some(IpAddr::V6(ip)) => format!("https://[{ip}]:{port}"),
            Some(IpAddr::V4(ip)) => format!("https://{ip}:{port}"),
            None => format!("https://localhost:{port}"),
        }
    }

    /// The DNS SANs of its serving certificate: [`APISERVER_DNS_NAMES`] then [`ServerSpec::dns`].
    pub(crate) fn dns_names(&self) -> Vec<String> {
        APISERVER_DNS_NAMES
            .iter()
            .map(|n| (*n).to_owned())
            .chain(self.dns.iter().cloned())
            .collect()
    }
}

/// What [`crate::Pki::generate`] creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PkiSpec {
    /// The apiservers, one serving certificate each; at least one, names unique.
    pub servers: Vec<ServerSpec>,
    /// CN of the front-proxy (requestheader) client certificate the proxy presents to peers.
    pub front_proxy_client_cn: String,
}

impl Default for PkiSpec {
    /// No servers (add some before generating) and [`DEFAULT_FRONT_PROXY_CLIENT_CN`].
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            front_proxy_client_cn: DEFAULT_FRONT_PROXY_CLIENT_CN.to_owned(),
        }
    }
}

impl PkiSpec {
    /// A spec for `servers` with the default front-proxy client CN.
    pub fn new(servers: impl IntoIterator<Item = ServerSpec>) -> Self {
        Self {
            servers: servers.into_iter().collect(),
            ..Self::default()
        }
    }

    /// Adds a server.
    pub fn with_server(mut self, server: ServerSpec) -> Self {
        self.servers.push(server);
        self
    }

    /// Sets the front-proxy client certificate's CN.
    pub fn with_front_proxy_client_cn(mut self, cn: impl Into<String>) -> Self {
        self.front_proxy_client_cn = cn.into();
        self
    }

    /// Checks what certificates cannot catch later: at least one server, unique DNS-label names (they
    /// become file names), and DNS SANs that are plain host names.
    pub fn validate(&self) -> Result<()> {
        if self.servers.is_empty() {
            return Err(Error::InvalidServerSpec(
                "at least one server is required".to_owned(),
            ));
        }
        let mut seen = BTreeSet::new();
        for server in &self.servers {
            if !is_dns_label(&server.name) {
                return Err(Error::InvalidServerSpec(format!(
                    "server name {:?} must be a DNS label (lower-case letters, digits, '-')",
                    server.name
                )));
            }
            if !seen.insert(server.name.as_str()) {
                return Err(Error::InvalidServerSpec(format!(
                    "duplicate server name {:?}",
                    server.name
                )));
            }
            if let Some(bad) = server.dns.iter().find(|name| !is_host_name(name)) {
                return Err(Error::InvalidServerSpec(format!(
                    "server {:?}: {bad:?} is not a DNS name",
                    server.name
                )));
            }
        }
        Ok(())
    }
}

fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

fn is_host_name(name: &str) -> bool {
    name.len() <= 253
        && name
            .split('.')
            .all(|label| is_dns_label(&label.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_uses_the_first_ip_and_brackets_ipv6() {
        let v4 = ServerSpec::new("a", ["127.0.0.2".parse().unwrap(), "::1".parse().unwrap()]);
        assert_eq!(v4.url(6443), "https://127.0.0.2:6443");
        let v6 = ServerSpec::new("a", ["::1".parse().unwrap()]);
        assert_eq!(v6.url(443), "https://[::1]:443");
        assert_eq!(ServerSpec::new("a", []).url(1), "https://localhost:1");
    }

    #[test]
    fn validate_rejects_unusable_specs() {
        let err = |spec: PkiSpec| spec.validate().unwrap_err().to_string();
        assert!(err(PkiSpec::default()).contains("at least one server"));
        assert!(
            err(PkiSpec::new([ServerSpec::new("a", []), ServerSpec::new("a", [])])).contains("duplicate")
        );
        for bad in ["", "A", "a_b", "-a", "a-", "a.b", &"x".repeat(64)] {
            assert!(
                err(PkiSpec::new([ServerSpec::new(bad, [])])).contains("DNS label"),
                "{bad:?}"
            );
        }
        for bad in ["", "a..b", "a b", "é.example", "-a.example"] {
            let spec = PkiSpec::new([ServerSpec::new("a", []).with_dns(bad)]);
            assert!(err(spec).contains("not a DNS name"), "{bad:?}");
        }
    }

    #[test]
    fn validate_accepts_labels_and_host_names() {
        let spec = PkiSpec::new([
            ServerSpec::new("kube-1", []).with_dns("Node-1.Example"),
            ServerSpec::new("2", []),
        ]);
        spec.validate().unwrap();
    }
}
