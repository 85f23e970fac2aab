//! The load balancer in front of a cluster's servers, as a production HA control plane has one
//! (kubeadm's HA guide: HAProxy in TCP mode, round robin, health checks of `/readyz` over TLS), and
//! `DIR/cluster.kubeconfig` pointing at it.
//!
//! Two implementations with the same semantics: [`embedded::EmbeddedBalancer`] (the default: nothing
//! to install) and [`haproxy::HaproxyBalancer`] (Debian's `haproxy`, configured as kubeadm's guide
//! configures it). The balancer listens on [`LB_IP`], an address of its own that every server's
//! certificate carries (as kubeadm adds the control-plane endpoint to the apiserver certificate).

pub mod embedded;
pub mod haproxy;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use serde_json::json;

use self::embedded::EmbeddedBalancer;
use self::haproxy::HaproxyBalancer;

/// The balancer's own loopback address (servers take `127.0.0.1` upwards).
pub const LB_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 254));

/// The name of the balancer's kubeconfig (`DIR/cluster.kubeconfig`).
pub const KUBECONFIG_NAME: &str = "cluster";

/// Which load balancer a cluster has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadBalancerKind {
    /// [`embedded::EmbeddedBalancer`].
    Embedded,
    /// [`haproxy::HaproxyBalancer`].
    Haproxy,
    /// None: clients use each server's own kubeconfig.
    None,
}

impl FromStr for LoadBalancerKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "embedded" => Ok(Self::Embedded),
            "haproxy" => Ok(Self::Haproxy),
            "none" => Ok(Self::None),
            other => Err(format!(
                "unknown value {other:?} (known: embedded, haproxy, none)"
            )),
        }
    }
}

/// How backends are checked: HAProxy's `inter`, `timeout check`, `fall` and `rise`. kubeadm's guide
/// keeps HAProxy's defaults (every 2 s, down after 3 failures, up after 2 successes); a demo cluster
/// checks every second, goes down after 2 failures and up after 1 success, so that a test sees a
/// failing server leave the rotation within about 2 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthCheck {
    /// Between two checks of a backend.
    pub interval: Duration,
    /// A check not answered within this fails.
    pub timeout: Duration,
    /// Consecutive failures that take a backend out.
    pub fall: u32,
    /// Consecutive successes that put it back.
    pub rise: u32,
}

impl Default for HealthCheck {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            fall: 2,
            rise: 1,
        }
    }
}

/// One backend's state as the balancer's stats show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BackendStats {
    /// Server name.
    pub name: String,
    /// `ip:port`.
    pub addr: String,
    /// `UP`, `DOWN` or `MAINT` (HAProxy's words).
    pub status: String,
    /// Connections sent to it so far.
    pub connections: u64,
    /// Connections open now.
    pub active: u64,
    /// Failed health checks so far.
    pub checks_failed: u64,
}

/// A running load balancer.
#[derive(Debug)]
pub enum RunningBalancer {
    /// In this process.
    Embedded(EmbeddedBalancer),
    /// An `haproxy` process.
    Haproxy(Box<HaproxyBalancer>),
}

impl RunningBalancer {
    /// Starts a balancer of `kind` on [`LB_IP`]:`port` (0: a free port) over `backends`, writing its
    /// files (HAProxy's configuration and log) in `dir`; `None` for [`LoadBalancerKind::None`]. Returns
    /// once every backend that is ready is in rotation.
    pub async fn start(
        kind: LoadBalancerKind,
        port: u16,
        backends: Vec<(String, SocketAddr)>,
        dir: &Path,
    ) -> anyhow::Result<Option<Self>> {
        use anyhow::Context as _;
        let check = HealthCheck::default();
        match kind {
            LoadBalancerKind::None => Ok(None),
            LoadBalancerKind::Embedded => {
                let listen = SocketAddr::new(LB_IP, port);
                let balancer = EmbeddedBalancer::start(listen, backends, check)
                    .await
                    .with_context(|| format!("the embedded load balancer cannot listen on {listen}"))?;
                Ok(Some(Self::Embedded(balancer)))
            }
            LoadBalancerKind::Haproxy => {
                let balancer = HaproxyBalancer::start(dir, port, backends, check).await?;
                Ok(Some(Self::Haproxy(Box::new(balancer))))
            }
        }
    }

    /// `https://ip:port` clients use.
    pub fn url(&self) -> String {
        format!("https://{}", self.local_addr())
    }

    /// The address clients connect to.
    pub fn local_addr(&self) -> SocketAddr {
        match self {
            Self::Embedded(b) => b.local_addr(),
            Self::Haproxy(b) => b.local_addr(),
        }
    }

    /// `embedded` or `haproxy`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Embedded(_) => "embedded",
            Self::Haproxy(_) => "haproxy",
        }
    }

    /// HAProxy's stats page (`/stats`, `;csv` for machines); the embedded balancer has none.
    pub fn stats_url(&self) -> Option<String> {
        match self {
            Self::Embedded(_) => None,
            Self::Haproxy(b) => Some(b.stats_url()),
        }
    }

    /// Per backend: state and connection counts.
    pub async fn stats(&self) -> anyhow::Result<Vec<BackendStats>> {
        match self {
            Self::Embedded(b) => Ok(b.stats()),
            Self::Haproxy(b) => b.stats().await,
        }
    }

    /// The `lb` object of `cluster.json`.
    pub fn manifest(&self, dir: &Path) -> serde_json::Value {
        json!({
            "kind": self.kind(),
            "url": self.url(),
            "kubeconfig": dir.join(format!("{KUBECONFIG_NAME}.kubeconfig")).display().to_string(),
            "stats": self.stats_url(),
        })
    }

    /// A line for the demo's banner.
    pub fn banner(&self, dir: &Path) -> String {
        let mut line = format!(
            "load balancer ({}): {}   kubectl --kubeconfig {}",
            self.kind(),
            self.url(),
            dir.join(format!("{KUBECONFIG_NAME}.kubeconfig")).display()
        );
        if let Some(stats) = self.stats_url() {
            line.push_str(&format!("   stats: {stats}"));
        }
        line
    }

    /// Stops it.
    pub async fn shutdown(self) {
        match self {
            Self::Embedded(b) => b.shutdown().await,
            Self::Haproxy(b) => b.shutdown().await,
        }
    }
}

/// Writes `DIR/cluster.kubeconfig` for `balancer` (atomically).
pub fn write_kubeconfig(dir: &Path, pki: &certs::Pki, balancer: &RunningBalancer) -> anyhow::Result<()> {
    let path = certs::PkiPaths::new(dir).kubeconfig(KUBECONFIG_NAME);
    super::write_atomically(&path, pki.kubeconfig(&balancer.url(), KUBECONFIG_NAME).as_bytes())
}
