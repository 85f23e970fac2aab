//! The cluster fixture: N fake kube-apiservers on loopback addresses sharing one store, with a PKI in a
//! temporary directory.
//!
//! [`ClusterBuilder`] describes the servers ([`ServerBuilder`]: version, `--runtime-config`, feature gates,
//! peer-resolution mode, hostname, timing knobs, any other kube-apiserver flag); [`ClusterBuilder::start`]
//! writes the PKI, starts every server on `127.0.0.<n>` with an ephemeral port and waits until each is
//! ready. [`TestCluster`] hands out clients, kubeconfigs and the shared store, and can kill, stop and
//! restart single servers. With [`ClusterBuilder::load_balancer`] a load balancer (the embedded one or
//! HAProxy, as `apiserver-fake cluster` runs them) fronts the servers, and
//! [`TestCluster::balancer_kubeconfig`] points at it. Unless told otherwise, a controller manager (the namespace controller) runs
//! against the cluster through the first server's kubeconfig, as kube-controller-manager runs beside
//! kube-apiserver: deleted namespaces are emptied and go.
//!
//! The store is chosen by the environment ([`StoreBackend::from_env`]): the in-memory store every server
//! of the process shares (the default), or, with `KUBE_MVP_STORE=etcd`, a private etcd, each server with
//! a connection of its own and each cluster under an `--etcd-prefix` of its own: the whole suite runs
//! on both (CI runs it twice).
//!
//! Teardown never leaks: dropping a [`TestCluster`] (also while a failing test unwinds) aborts every
//! server task, which closes their listeners, and removes the temporary directory;
//! [`TestCluster::shutdown`] does the same gracefully (servers clean up what they published).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use apiserver_fake::cluster::controller_manager::InProcessControllerManager;
pub use apiserver_fake::cluster::load_balancer::LoadBalancerKind;
use apiserver_fake::cluster::load_balancer::{self, RunningBalancer};
use apiserver_fake::server::RunningServer;
use apiserver_fake::server::config::ServerFlags;
use apiserver_fake::store::{MemoryStore, Store};
pub use controller_manager::ControllerManagerOptions;
use mvp_core::PeerResolutionMode;

use crate::client::{ClientIdentity, HttpsClient};
use crate::error::{FixtureError, Result};
use crate::exchange::redact_text;
use kube_mvp_testing::Kubectl;

/// A bearer token every server of a fixture cluster accepts, for user `admin` (UID `admin-uid`) in
/// `system:masters`.
pub const ADMIN_TOKEN: &str = "e2e-admin-token";
/// A bearer token for user `jane` (UID `jane-uid`) in groups `developers` and `qa`: an identity with a
/// UID and several groups, to see what a proxy forwards.
pub const JANE_TOKEN: &str = "e2e-jane-token";

pub(crate) const TOKENS_CSV: &str = "e2e-admin-token,admin,admin-uid,\"system:masters\"\n\
                          e2e-jane-token,jane,jane-uid,\"developers,qa\"\n";

/// The environment variable that selects the store of fixture clusters: `memory` (default) or `etcd`.
pub const STORE_ENV: &str = "KUBE_MVP_STORE";

/// Where a fixture cluster keeps its objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreBackend {
    /// One in-memory store shared by the servers of the cluster (the default).
    Memory,
    /// A private etcd shared by the test process, under a key prefix of the cluster's own; every
    /// server opens its own connection, as separate kube-apiservers do. Needs the `etcd` feature and
    /// the `etcd` binary.
    Etcd,
}

impl StoreBackend {
    /// The backend [`STORE_ENV`] names (unset: [`StoreBackend::Memory`]).
    pub fn from_env() -> Result<Self> {
        match std::env::var(STORE_ENV).as_deref() {
            Err(_) | Ok("") | Ok("memory") => Ok(Self::Memory),
            Ok("etcd") => Ok(Self::Etcd),
            Ok(other) => Err(FixtureError::Store(format!(
                "{STORE_ENV}={other:?}: expected \"memory\" or \"etcd\""
            ))),
        }
    }
}

/// The etcd of a fixture cluster: client URL and the cluster's key prefix.
#[derive(Debug, Clone)]
struct EtcdLocation {
    url: String,
    prefix: String,
}

/// Opens the cluster store of `backend`: a new in-memory store, or a connection to the shared private
/// etcd under a fresh prefix.
async fn open_store(backend: StoreBackend) -> Result<(Arc<dyn Store>, Option<EtcdLocation>)> {
    match backend {
        StoreBackend::Memory => Ok((Arc::new(MemoryStore::new()), None)),
        StoreBackend::Etcd => open_etcd().await,
    }
}

#[cfg(feature = "etcd")]
async fn open_etcd() -> Result<(Arc<dyn Store>, Option<EtcdLocation>)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static CLUSTERS: AtomicU64 = AtomicU64::new(0);
    // The first call starts etcd and polls its health with blocking sleeps: off the async workers.
    let etcd = tokio::task::spawn_blocking(apiserver_fake::cluster::etcd_process::EtcdProcess::shared)
        .await
        .map_err(|e| FixtureError::Store(e.to_string()))?
        .map_err(FixtureError::Store)?;
    let location = EtcdLocation {
        url: etcd.client_url().to_owned(),
        prefix: format!(
            "/e2e-{}-{}/registry",
            std::process::id(),
            CLUSTERS.fetch_add(1, Ordering::Relaxed)
        ),
    };
    let config = apiserver_fake::store::EtcdConfig {
        servers: vec![location.url.clone()],
        prefix: location.prefix.clone(),
    };
    let store = apiserver_fake::store::EtcdStore::connect(&config, Duration::from_secs(5))
        .await
        .map_err(|e| FixtureError::Store(e.to_string()))?;
    Ok((Arc::new(store), Some(location)))
}

#[cfg(not(feature = "etcd"))]
async fn open_etcd() -> Result<(Arc<dyn Store>, Option<EtcdLocation>)> {
    Err(FixtureError::Store(format!(
        "{STORE_ENV}=etcd needs the e2e crate's `etcd` feature (cargo test -p e2e --features etcd)"
    )))
}

/// Feature gate of the Mixed Version Proxy.
pub const MVP_GATE: &str = apiserver_fake::server::config::MVP_FEATURE_GATE;

/// Whether a server gets `--peer-ca-file` (which installs the proxy filter when the gate is on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerProxy {
    /// Set `--peer-ca-file` (the cluster CA) exactly when the proxy's feature gate is on for the server,
    /// as an operator following the documentation would.
    Auto,
    /// Always set it (with the gate off this is the validation error of checklist item 25).
    Always,
    /// Never set it: the gate may be on, but no filter is installed (checklist item 23).
    Never,
}

/// One server of a [`ClusterBuilder`]: a kube-apiserver command line, built from named options.
///
/// Flags are kept by name, so a later setting of the same flag replaces an earlier one (the fixture's
/// defaults included); list-valued flags are given whole.
#[derive(Debug, Clone)]
pub struct ServerBuilder {
    name: String,
    ip: Option<Ipv4Addr>,
    feature_gates: BTreeMap<String, bool>,
    runtime_config: Vec<String>,
    flags: Vec<(String, Option<String>)>,
    unset: Vec<String>,
    peer_proxy: PeerProxy,
}

impl ServerBuilder {
    /// A server `name` with the defaults (version 1.36, all default APIs, hostname = name).
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            ip: None,
            feature_gates: BTreeMap::new(),
            runtime_config: Vec::new(),
            flags: Vec::new(),
            unset: Vec::new(),
            peer_proxy: PeerProxy::Auto,
        }
    }

    /// The server's name in the fixture (also its default hostname, from which its server ID derives).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The fake binary's Kubernetes version (`--kubernetes-version`, 1.28 to 1.36; default 1.36).
    pub fn version(self, version: &str) -> Self {
        self.flag(&format!("--kubernetes-version={version}"))
    }

    /// The version whose APIs and behaviour are emulated (`--emulated-version`).
    pub fn emulated_version(self, version: &str) -> Self {
        self.flag(&format!("--emulated-version={version}"))
    }

    /// Adds `key=value` pairs to `--runtime-config` (e.g. `batch/v1=false`); calls accumulate.
    pub fn runtime_config(mut self, entries: &str) -> Self {
        self.runtime_config.push(entries.to_owned());
        self
    }

    /// Sets one feature gate (`--feature-gates=Name=value`); calls accumulate.
    pub fn feature_gate(mut self, gate: &str, enabled: bool) -> Self {
        self.feature_gates.insert(gate.to_owned(), enabled);
        self
    }

    /// Forces the proxy's peer-resolution semantics instead of the emulated version's default
    /// (StorageVersion for 1.28–1.32, Discovery from 1.33).
    pub fn peer_resolution_mode(self, mode: PeerResolutionMode) -> Self {
        let value = match mode {
            PeerResolutionMode::StorageVersion => "storage-version",
            PeerResolutionMode::Discovery => "discovery",
        };
        self.flag(&format!("--peer-resolution-mode={value}"))
    }

    /// The hostname the server ID and identity lease name derive from (default: the server's name).
    pub fn hostname(self, hostname: &str) -> Self {
        self.flag(&format!("--hostname={hostname}"))
    }

    /// The loopback address to listen on (default `127.0.0.<position in the builder + 1>`).
    pub fn ip(mut self, ip: Ipv4Addr) -> Self {
        self.ip = Some(ip);
        self
    }

    /// Identity lease duration (`--identity-lease-duration-seconds`, whole seconds, at least 1).
    pub fn identity_lease_duration(self, duration: Duration) -> Self {
        self.flag(&format!(
            "--identity-lease-duration-seconds={}",
            duration.as_secs().max(1)
        ))
    }

    /// Identity lease renew interval (`--identity-lease-renew-interval-seconds`, whole seconds, at least 1).
    pub fn identity_lease_renew_interval(self, interval: Duration) -> Self {
        self.flag(&format!(
            "--identity-lease-renew-interval-seconds={}",
            interval.as_secs().max(1)
        ))
    }

    /// TTL of the server's peer endpoint record (`--peer-endpoint-ttl-seconds`, whole seconds; upstream
    /// 15 s): how long a crashed server stays resolvable for its peers.
    pub fn peer_endpoint_ttl(self, ttl: Duration) -> Self {
        self.flag(&format!("--peer-endpoint-ttl-seconds={}", ttl.as_secs().max(1)))
    }

    /// Refresh interval of the peer endpoint record (`--peer-endpoint-refresh-seconds`, whole seconds,
    /// below the TTL; upstream 10 s).
    pub fn peer_endpoint_refresh(self, interval: Duration) -> Self {
        self.flag(&format!(
            "--peer-endpoint-refresh-seconds={}",
            interval.as_secs().max(1)
        ))
    }

    /// Whether to pass `--peer-ca-file` (default [`PeerProxy::Auto`]).
    pub fn peer_proxy(mut self, mode: PeerProxy) -> Self {
        self.peer_proxy = mode;
        self
    }

    /// Any kube-apiserver flag, `--name=value` or `--name`; replaces an earlier value of the same flag,
    /// including the fixture's defaults (PKI paths, requestheader settings). `{pki}` in the value stands
    /// for the cluster's PKI directory (e.g. `--peer-ca-file={pki}/front-proxy-ca.crt`).
    pub fn flag(mut self, flag: &str) -> Self {
        let (name, value) = match flag.split_once('=') {
            Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
            None => (flag.to_owned(), None),
        };
        self.unset.retain(|n| *n != name);
        self.flags.retain(|(n, _)| *n != name);
        self.flags.push((name, value));
        self
    }

    /// Removes a flag the fixture would set by default (e.g. `--proxy-client-cert-file`).
    pub fn unset_flag(mut self, name: &str) -> Self {
        self.flags.retain(|(n, _)| n != name);
        self.unset.push(name.to_owned());
        self
    }

    /// The command line with `--peer-ca-file` as [`PeerProxy`] says (for `Auto`: exactly when the
    /// flags turn the proxy's gate on); flags the server would reject are an error.
    pub(crate) fn full_command_line(
        &self,
        paths: &certs::PkiPaths,
        ip: Ipv4Addr,
        token_csv: &Path,
    ) -> Result<Vec<String>> {
        let peer_ca = match self.peer_proxy {
            PeerProxy::Always => true,
            PeerProxy::Never => false,
            PeerProxy::Auto => {
                let invalid = |message: String| FixtureError::InvalidFlags {
                    server: self.name.clone(),
                    message,
                };
                let probe = self.command_line(paths, ip, token_csv, false);
                let flags = ServerFlags::from_args(probe).map_err(|e| invalid(e.to_string()))?;
                flags
                    .validate()
                    .map_err(|e| invalid(e.to_string()))?
                    .mvp_gate_enabled()
            }
        };
        Ok(self.command_line(paths, ip, token_csv, peer_ca))
    }

    /// The command line for this server, given the PKI files and its address.
    fn command_line(
        &self,
        paths: &certs::PkiPaths,
        ip: Ipv4Addr,
        token_csv: &Path,
        peer_ca: bool,
    ) -> Vec<String> {
        let p = |path: &Path| path.display().to_string();
        let mut flags: Vec<(String, Option<String>)> = vec![
            ("--hostname".into(), Some(self.name.clone())),
            ("--bind-address".into(), Some(ip.to_string())),
            ("--secure-port".into(), Some("0".into())),
            ("--tls-cert-file".into(), Some(p(&paths.server_cert(&self.name)))),
            (
                "--tls-private-key-file".into(),
                Some(p(&paths.server_key(&self.name))),
            ),
            ("--client-ca-file".into(), Some(p(&paths.ca_cert))),
            ("--token-auth-file".into(), Some(p(token_csv))),
            (
                "--service-account-issuer".into(),
                Some(apiserver_fake::api::serviceaccount::DEFAULT_ISSUER.into()),
            ),
            (
                "--service-account-key-file".into(),
                Some(p(&paths.service_account_pub)),
            ),
            (
                "--service-account-signing-key-file".into(),
                Some(p(&paths.service_account_key)),
            ),
            (
                "--requestheader-client-ca-file".into(),
                Some(p(&paths.front_proxy_ca_cert)),
            ),
            (
                "--requestheader-allowed-names".into(),
                Some(certs::DEFAULT_FRONT_PROXY_CLIENT_CN.into()),
            ),
            (
                "--requestheader-username-headers".into(),
                Some("X-Remote-User".into()),
            ),
            ("--requestheader-uid-headers".into(), Some("X-Remote-Uid".into())),
            (
                "--requestheader-group-headers".into(),
                Some("X-Remote-Group".into()),
            ),
            (
                "--requestheader-extra-headers-prefix".into(),
                Some("X-Remote-Extra-".into()),
            ),
            (
                "--proxy-client-cert-file".into(),
                Some(p(&paths.front_proxy_client_cert)),
            ),
            (
                "--proxy-client-key-file".into(),
                Some(p(&paths.front_proxy_client_key)),
            ),
        ];
        if peer_ca {
            flags.push(("--peer-ca-file".into(), Some(p(&paths.ca_cert))));
        }
        if !self.feature_gates.is_empty() {
            let gates: Vec<String> = self
                .feature_gates
                .iter()
                .map(|(g, v)| format!("{g}={v}"))
                .collect();
            flags.push(("--feature-gates".into(), Some(gates.join(","))));
        }
        if !self.runtime_config.is_empty() {
            flags.push(("--runtime-config".into(), Some(self.runtime_config.join(","))));
        }
        for (name, value) in &self.flags {
            flags.retain(|(n, _)| n != name);
            flags.push((name.clone(), value.clone()));
        }
        flags.retain(|(n, _)| !self.unset.contains(n));
        let pki = paths.dir.display().to_string();
        flags
            .into_iter()
            .map(|(name, value)| match value {
                Some(value) => format!("{name}={}", value.replace("{pki}", &pki)),
                None => name,
            })
            .collect()
    }
}

/// Describes a cluster of fakes; [`ClusterBuilder::start`] starts it.
///
/// ```no_run
/// # async fn demo() -> e2e::Result<()> {
/// use e2e::ClusterBuilder;
///
/// let cluster = ClusterBuilder::new()
///     .server("a", |s| s.version("1.36"))
///     .server("b", |s| s.version("1.36").runtime_config("batch/v1=false"))
///     .start()
///     .await?;
/// let jobs = cluster.client("b")?.get("/apis/batch/v1/namespaces/default/jobs").await?;
/// assert_eq!(jobs.code(), 200); // b does not serve batch/v1: a answered through the proxy
/// cluster.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ClusterBuilder {
    servers: Vec<ServerBuilder>,
    ready_timeout: Duration,
    controller_manager: Option<ControllerManagerSpec>,
    balancer: LoadBalancerKind,
}

/// Where and how a fixture cluster's controller manager runs.
#[derive(Debug, Clone)]
struct ControllerManagerSpec {
    /// The server whose kubeconfig it uses (`None`: the first).
    through: Option<String>,
    options: ControllerManagerOptions,
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl ClusterBuilder {
    /// An empty cluster (readiness timeout 10 s).
    pub fn new() -> Self {
        Self {
            servers: Vec::new(),
            ready_timeout: Duration::from_secs(10),
            controller_manager: Some(ControllerManagerSpec {
                through: None,
                options: ControllerManagerOptions::default(),
            }),
            balancer: LoadBalancerKind::None,
        }
    }

    /// Puts a load balancer of `kind` in front of the servers, as `apiserver-fake cluster` does (TCP,
    /// round robin per connection, `/readyz` checked every second; [`LoadBalancerKind::Haproxy`]
    /// needs `haproxy` on `PATH`), on `127.0.0.254` with a free port; every server's certificate
    /// carries that address. Clients reach it through [`TestCluster::balancer_kubeconfig`] and
    /// [`TestCluster::balancer_client`]. The controller manager still talks to its server directly.
    pub fn load_balancer(mut self, kind: LoadBalancerKind) -> Self {
        self.balancer = kind;
        self
    }

    /// Runs no controller manager: deleted namespaces stay `Terminating` (their content stays too).
    pub fn without_controller_manager(mut self) -> Self {
        self.controller_manager = None;
        self
    }

    /// Runs the controller manager through server `name`'s kubeconfig (default: the first server's),
    /// so it sees what clients of that server see.
    pub fn controller_manager_through(mut self, name: &str) -> Self {
        self.controller_manager
            .get_or_insert_with(|| ControllerManagerSpec {
                through: None,
                options: ControllerManagerOptions::default(),
            })
            .through = Some(name.to_owned());
        self
    }

    /// The controller manager's options (controllers, namespace deletion grace period, ...).
    pub fn controller_manager_options(mut self, options: ControllerManagerOptions) -> Self {
        self.controller_manager
            .get_or_insert_with(|| ControllerManagerSpec {
                through: None,
                options: ControllerManagerOptions::default(),
            })
            .options = options;
        self
    }

    /// Adds server `name`, configured by `configure` (start from the defaults: version 1.36, all default
    /// APIs, hostname = name).
    pub fn server(mut self, name: &str, configure: impl FnOnce(ServerBuilder) -> ServerBuilder) -> Self {
        self.servers.push(configure(ServerBuilder::named(name)));
        self
    }

    /// How long [`ClusterBuilder::start`] waits for each server to report ready.
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    /// Writes the PKI into a new temporary directory, starts every server (in order) on one shared
    /// in-memory store and waits until each is ready. On error, whatever was started is torn down.
    pub async fn start(self) -> Result<TestCluster> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut names = std::collections::BTreeSet::new();
        let mut members = Vec::with_capacity(self.servers.len());
        for (index, server) in self.servers.into_iter().enumerate() {
            if !names.insert(server.name.clone()) {
                return Err(FixtureError::Layout(format!(
                    "server name {:?} used twice",
                    server.name
                )));
            }
            let ip = match server.ip {
                Some(ip) => ip,
                None => {
                    let octet = u8::try_from(index + 1)
                        .ok()
                        .filter(|o| *o < 255)
                        .ok_or_else(|| FixtureError::Layout("more than 254 servers".to_owned()))?;
                    Ipv4Addr::new(127, 0, 0, octet)
                }
            };
            members.push((server, ip));
        }
        let dir = tempfile::Builder::new()
            .prefix("kube-mvp-e2e-")
            .tempdir()
            .map_err(|source| FixtureError::Io {
                path: std::env::temp_dir(),
                source,
            })?;
        let spec = certs::PkiSpec::new(
            members
                .iter()
                // The balancer's address too, as kubeadm adds the control-plane endpoint.
                .map(|(server, ip)| {
                    certs::ServerSpec::new(server.name.clone(), [IpAddr::V4(*ip), load_balancer::LB_IP])
                }),
        );
        let pki = certs::Pki::generate(&spec)?;
        let paths = pki.write_to(dir.path())?;
        let token_csv = dir.path().join("tokens.csv");
        std::fs::write(&token_csv, TOKENS_CSV).map_err(|source| FixtureError::Io {
            path: token_csv.clone(),
            source,
        })?;
        let (store, etcd) = open_store(StoreBackend::from_env()?).await?;
        let mut cluster = TestCluster {
            controller_manager: None,
            balancer: None,
            store,
            etcd,
            servers: Vec::new(),
            pki,
            paths,
            token_csv,
            ready_timeout: self.ready_timeout,
            dir,
        };
        for (builder, ip) in members {
            let running = cluster.start_server(&builder, ip).await?;
            let server_id = running.server_id().to_owned();
            cluster.servers.push(ClusterServer {
                builder,
                ip,
                server_id,
                running: Some(running),
            });
        }
        for server in &cluster.servers {
            cluster.wait_ready(server).await?;
        }
        cluster.start_balancer(self.balancer).await?;
        if let Some(spec) = self.controller_manager {
            let through = match spec.through {
                Some(name) => name,
                None => cluster
                    .servers
                    .first()
                    .map(|s| s.builder.name.clone())
                    .ok_or_else(|| FixtureError::Layout("a controller manager needs a server".to_owned()))?,
            };
            let kubeconfig = cluster.kubeconfig(&through)?;
            let manager = InProcessControllerManager::start(&kubeconfig, spec.options)
                .await
                .map_err(|e| FixtureError::ControllerManager(format!("{e:#}")))?;
            cluster.controller_manager = Some(manager);
        }
        Ok(cluster)
    }
}

/// One member of a running cluster.
#[derive(Debug)]
struct ClusterServer {
    builder: ServerBuilder,
    ip: Ipv4Addr,
    server_id: String,
    running: Option<RunningServer>,
}

/// A running cluster of fakes. Dropping it aborts every server and removes its files.
pub struct TestCluster {
    /// First field: stopped before the servers go.
    controller_manager: Option<InProcessControllerManager>,
    /// Stopped before the servers go too.
    balancer: Option<RunningBalancer>,
    store: Arc<dyn Store>,
    etcd: Option<EtcdLocation>,
    servers: Vec<ClusterServer>,
    pki: certs::Pki,
    paths: certs::PkiPaths,
    token_csv: PathBuf,
    ready_timeout: Duration,
    // Last field: dropped after the servers, so no server outlives its files.
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCluster")
            .field("dir", &self.dir.path())
            .field("servers", &self.servers)
            .finish()
    }
}

impl TestCluster {
    /// Starts the balancer of `kind` over every server and writes its kubeconfig.
    async fn start_balancer(&mut self, kind: LoadBalancerKind) -> Result<()> {
        let balancer_error = |e| FixtureError::Start {
            server: load_balancer::KUBECONFIG_NAME.to_owned(),
            message: format!("load balancer: {e:#}"),
        };
        let backends = self
            .servers
            .iter()
            .filter_map(|s| Some((s.builder.name.clone(), s.running.as_ref()?.local_addr())))
            .collect();
        self.balancer = RunningBalancer::start(kind, 0, backends, self.dir.path())
            .await
            .map_err(balancer_error)?;
        if let Some(balancer) = &self.balancer {
            load_balancer::write_kubeconfig(self.dir.path(), &self.pki, balancer).map_err(balancer_error)?;
        }
        Ok(())
    }

    /// The load balancer in front, when the builder asked for one.
    pub fn balancer(&self) -> Option<&RunningBalancer> {
        self.balancer.as_ref()
    }

    /// The admin kubeconfig of the load balancer (`DIR/cluster.kubeconfig`).
    pub fn balancer_kubeconfig(&self) -> Result<PathBuf> {
        self.balancer
            .as_ref()
            .map(|_| self.paths.kubeconfig(load_balancer::KUBECONFIG_NAME))
            .ok_or_else(|| FixtureError::UnknownServer(load_balancer::KUBECONFIG_NAME.to_owned()))
    }

    /// An HTTPS client of the load balancer as `admin`; each new connection may reach another
    /// server.
    pub fn balancer_client(&self) -> Result<HttpsClient> {
        let balancer = self
            .balancer
            .as_ref()
            .ok_or_else(|| FixtureError::UnknownServer(load_balancer::KUBECONFIG_NAME.to_owned()))?;
        HttpsClient::new(
            load_balancer::KUBECONFIG_NAME,
            &balancer.url(),
            &self.paths.ca_cert,
            ClientIdentity::Certificate {
                cert: self.paths.admin_cert.clone(),
                key: self.paths.admin_key.clone(),
            },
        )
    }

    /// kubectl through the load balancer, or `None` (with the reason printed) when kubectl is not
    /// installed.
    pub fn balancer_kubectl(&self) -> Result<Option<Kubectl>> {
        let kubeconfig = self.balancer_kubeconfig()?;
        Ok(Kubectl::find()
            .map(|binary| Kubectl::new(binary, kubeconfig, self.dir()).with_output_filter(redact_text)))
    }

    async fn start_server(&self, builder: &ServerBuilder, ip: Ipv4Addr) -> Result<RunningServer> {
        let invalid = |message: String| FixtureError::InvalidFlags {
            server: builder.name.clone(),
            message,
        };
        let mut args = builder.full_command_line(&self.paths, ip, &self.token_csv)?;
        if let Some(etcd) = &self.etcd {
            args.push(format!("--etcd-servers={}", etcd.url));
            args.push(format!("--etcd-prefix={}", etcd.prefix));
        }
        let flags = ServerFlags::from_args(args).map_err(|e| invalid(e.to_string().trim().to_owned()))?;
        let options = flags.validate().map_err(|e| invalid(e.to_string()))?;
        // On etcd each server opens a connection of its own, as separate kube-apiservers do.
        let store = match &self.etcd {
            None => self.store.clone(),
            Some(_) => options
                .flags
                .open_store(Duration::from_secs(5))
                .await
                .map_err(|e| FixtureError::Store(e.to_string()))?,
        };
        let running =
            apiserver_fake::server::start(options, store)
                .await
                .map_err(|e| FixtureError::Start {
                    server: builder.name.clone(),
                    message: error_chain(&e),
                })?;
        self.pki.write_kubeconfig(
            &self.paths.kubeconfig(&builder.name),
            &running.url(),
            &builder.name,
        )?;
        Ok(running)
    }

    async fn wait_ready(&self, server: &ClusterServer) -> Result<()> {
        let Some(running) = &server.running else {
            return Ok(());
        };
        if running.wait_ready(self.ready_timeout).await {
            Ok(())
        } else {
            Err(FixtureError::NotReady {
                server: server.builder.name.clone(),
                seconds: self.ready_timeout.as_secs(),
            })
        }
    }

    fn member(&self, name: &str) -> Result<&ClusterServer> {
        self.servers
            .iter()
            .find(|s| s.builder.name == name)
            .ok_or_else(|| FixtureError::UnknownServer(name.to_owned()))
    }

    fn member_mut(&mut self, name: &str) -> Result<&mut ClusterServer> {
        self.servers
            .iter_mut()
            .find(|s| s.builder.name == name)
            .ok_or_else(|| FixtureError::UnknownServer(name.to_owned()))
    }

    /// The running server `name`.
    pub fn server(&self, name: &str) -> Result<&RunningServer> {
        self.member(name)?
            .running
            .as_ref()
            .ok_or_else(|| FixtureError::UnknownServer(name.to_owned()))
    }

    /// Names of the servers, in builder order (stopped ones included).
    pub fn names(&self) -> Vec<&str> {
        self.servers.iter().map(|s| s.builder.name.as_str()).collect()
    }

    /// `https://127.0.0.n:port` of server `name`.
    pub fn url(&self, name: &str) -> Result<String> {
        Ok(self.server(name)?.url())
    }

    /// The APIServerID of server `name` (also its identity lease name), also after it stopped.
    pub fn server_id(&self, name: &str) -> Result<String> {
        Ok(self.member(name)?.server_id.clone())
    }

    /// Which store the cluster runs on.
    pub fn backend(&self) -> StoreBackend {
        if self.etcd.is_some() {
            StoreBackend::Etcd
        } else {
            StoreBackend::Memory
        }
    }

    /// On etcd, its client URL and the cluster's `--etcd-prefix`.
    pub fn etcd(&self) -> Option<(&str, &str)> {
        self.etcd.as_ref().map(|e| (e.url.as_str(), e.prefix.as_str()))
    }

    /// The store every server of the cluster shares (its "etcd"; on etcd, a connection of the
    /// fixture's own under the cluster's prefix).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The directory holding the PKI, kubeconfigs and token file; removed with the cluster.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The PKI file paths (kubeadm's names).
    pub fn paths(&self) -> &certs::PkiPaths {
        &self.paths
    }

    /// The PKI itself, to issue more client certificates.
    pub fn pki(&self) -> &certs::Pki {
        &self.pki
    }

    /// The admin kubeconfig of server `name` (rewritten when the server restarts on a new port).
    pub fn kubeconfig(&self, name: &str) -> Result<PathBuf> {
        self.member(name)?;
        Ok(self.paths.kubeconfig(name))
    }

    /// An HTTPS client of server `name` authenticated as `admin` (`system:masters`) with a client
    /// certificate.
    pub fn client(&self, name: &str) -> Result<HttpsClient> {
        self.client_as(
            name,
            ClientIdentity::Certificate {
                cert: self.paths.admin_cert.clone(),
                key: self.paths.admin_key.clone(),
            },
        )
    }

    /// An HTTPS client of server `name` with the given identity.
    pub fn client_as(&self, name: &str, identity: ClientIdentity) -> Result<HttpsClient> {
        HttpsClient::new(name, &self.url(name)?, &self.paths.ca_cert, identity)
    }

    /// kubectl for server `name`, or `None` (with the reason printed) when kubectl is not installed.
    pub fn kubectl(&self, name: &str) -> Result<Option<Kubectl>> {
        let kubeconfig = self.kubeconfig(name)?;
        Ok(Kubectl::find()
            .map(|binary| Kubectl::new(binary, kubeconfig, self.dir()).with_output_filter(redact_text)))
    }

    /// Stops server `name` the way a crash does: it vanishes without cleaning up what it published
    /// (identity lease, peer endpoint record, StorageVersion entries).
    /// Returns once its sockets are closed.
    pub async fn kill(&mut self, name: &str) -> Result<()> {
        let member = self.member_mut(name)?;
        match member.running.take() {
            Some(running) => {
                running.kill().await;
                Ok(())
            }
            None => Err(FixtureError::UnknownServer(name.to_owned())),
        }
    }

    /// Stops server `name` gracefully (it removes its peer endpoint record and, from 1.35, its identity
    /// lease).
    pub async fn stop(&mut self, name: &str) -> Result<()> {
        let member = self.member_mut(name)?;
        match member.running.take() {
            Some(running) => {
                running.shutdown().await;
                Ok(())
            }
            None => Err(FixtureError::UnknownServer(name.to_owned())),
        }
    }

    /// Starts server `name` again with the same command line (same hostname, hence the same server ID,
    /// and the same address; a new port) after [`TestCluster::kill`] or [`TestCluster::stop`]; kills it
    /// first if it is still running. Waits until it is ready.
    pub async fn restart(&mut self, name: &str) -> Result<()> {
        let index = self
            .servers
            .iter()
            .position(|s| s.builder.name == name)
            .ok_or_else(|| FixtureError::UnknownServer(name.to_owned()))?;
        if let Some(running) = self.servers[index].running.take() {
            running.kill().await;
        }
        let (builder, ip) = (self.servers[index].builder.clone(), self.servers[index].ip);
        let running = self.start_server(&builder, ip).await?;
        // The embedded balancer learns the new port (HAProxy keeps the configuration it started
        // with: a restarted server is out of its rotation).
        if let Some(RunningBalancer::Embedded(balancer)) = &self.balancer {
            balancer.set_backend(index, running.local_addr());
        }
        self.servers[index].server_id = running.server_id().to_owned();
        self.servers[index].running = Some(running);
        self.wait_ready(&self.servers[index]).await
    }

    /// Stops the controller manager, then every server gracefully, then removes the files.
    pub async fn shutdown(mut self) {
        if let Some(manager) = self.controller_manager.take() {
            manager.stop().await;
        }
        if let Some(balancer) = self.balancer.take() {
            balancer.shutdown().await;
        }
        for server in &mut self.servers {
            if let Some(running) = server.running.take() {
                running.shutdown().await;
            }
        }
    }
}

/// `error` and its sources, joined by `": "` (as anyhow's `{:#}`): a cause is an error's source, not
/// part of its Display.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
