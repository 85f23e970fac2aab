//! The demo: several fakes in one process on distinct loopback addresses, sharing one store, like the
//! apiservers of an HA control plane share etcd.
//!
//! `apiserver-fake cluster --dir DIR [--preset NAME | --config FILE]` writes the PKI (kubeadm's file
//! names), one kubeconfig per server (`DIR/NAME.kubeconfig`), the load balancer's
//! (`DIR/cluster.kubeconfig`, see [`load_balancer`]), a static bearer token (`DIR/token`, for HTTP
//! load tools) and `DIR/cluster.json`, prints a table and runs until SIGINT/SIGTERM. The cluster is
//! described by a YAML file (`config_file`); the presets are such files.

pub(crate) mod config_file;
pub mod containers;
pub mod controller_manager;
pub mod etcd_process;
pub mod load_balancer;
pub mod process;
pub mod real_member;
pub mod upgrade;

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

use self::config_file::{ClusterConfig, RunMode, StoreChoice};
use self::load_balancer::{LoadBalancerKind, RunningBalancer};
use crate::server::RunningServer;
use crate::server::config::{ServerFlags, ServerOptions};
use crate::store::{MemoryStore, Store};

/// `apiserver-fake cluster` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// Where to write the PKI, kubeconfigs and cluster.json (default: a temporary directory removed on exit).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Which cluster to start: `default` (a: 1.36 without batch/v1, b: 1.36) or `upgrade` (a 1.35→1.36
    /// rollout caught in the middle: a is 1.36, b and c are 1.35).
    #[arg(long, default_value = "default")]
    pub preset: Preset,
    /// Start the cluster a YAML file describes (servers, store, how they run, load balancer,
    /// controllers; see the README). The presets are such files (`apiserver-fake/examples/clusters/`).
    #[arg(long, conflicts_with_all = ["preset", "etcd", "etcd_servers"])]
    pub config: Option<PathBuf>,
    /// The load balancer in front of the servers, `DIR/cluster.kubeconfig` pointing at it: `embedded`
    /// (in this process), `haproxy` (the `haproxy` on PATH) or `none` (default: the file's `lb`, else
    /// embedded).
    #[arg(long)]
    pub lb: Option<LoadBalancerKind>,
    /// Secure port of every server (each has its own loopback address); 0 picks free ports.
    #[arg(long, default_value_t = 6443)]
    pub port: u16,
    /// Run every server as its own OS process on a private etcd (the `etcd` binary on PATH), its data
    /// in DIR/etcd so that a second start with the same --dir finds the objects again. Needs a binary
    /// built with the `etcd` feature.
    #[arg(long, conflicts_with = "etcd_servers")]
    pub etcd: bool,
    /// Run every server as its own OS process on this existing etcd (comma-separated client URLs)
    /// instead of a private one.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    /// The key prefix in etcd (kube-apiserver's --etcd-prefix).
    #[arg(long, default_value = "/registry")]
    pub etcd_prefix: String,
    /// kube-apiserver's --authorization-mode for every server (e.g. `Node,RBAC`, as kubeadm sets it;
    /// the admin kubeconfigs and the demo token are in system:masters, which RBAC binds to cluster-admin).
    #[arg(long)]
    pub authorization_mode: Option<String>,
    /// Do not run the controller manager (the namespace controller and the garbage collector) against
    /// the cluster; namespaces then stay `Terminating` until something finalizes them and dependents
    /// stay after their owners are gone (e.g. until `apiserver-fake controller-manager` runs).
    #[arg(long)]
    pub no_controller_manager: bool,
}

impl ClusterArgs {
    /// The servers to start: the preset's, with the cluster-wide flags added.
    pub fn members(&self) -> Vec<MemberSpec> {
        let mut members = self.preset.members();
        if let Some(mode) = &self.authorization_mode {
            for member in &mut members {
                member.extra_flags.push(format!("--authorization-mode={mode}"));
            }
        }
        members
    }

    /// The cluster to start: `--config`'s file or the preset, with the command line's `--etcd`,
    /// `--etcd-servers`, `--lb`, `--authorization-mode` and `--no-controller-manager` applied.
    pub fn cluster_config(&self) -> anyhow::Result<ClusterConfig> {
        let mut config = match &self.config {
            Some(path) => ClusterConfig::read(path)?,
            None => ClusterConfig::preset(self.preset.name()).map_err(anyhow::Error::msg)?,
        };
        if self.etcd {
            config.store = StoreChoice::PrivateEtcd;
            config.run = RunMode::Processes;
        } else if !self.etcd_servers.is_empty() {
            config.store = StoreChoice::ExistingEtcd(self.etcd_servers.clone());
            config.run = RunMode::Processes;
        }
        if let Some(lb) = self.lb {
            config.lb = lb;
        }
        if self.no_controller_manager {
            config.controller_manager = false;
        }
        if let Some(mode) = &self.authorization_mode {
            for member in &mut config.members {
                member.extra_flags.push(format!("--authorization-mode={mode}"));
            }
        }
        Ok(config)
    }
}

/// A named cluster layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// The documented example: servers `a` and `b`, both 1.36, `a` with `batch/v1` disabled.
    Default,
    /// A 1.35→1.36 rolling upgrade caught in the middle: `a` upgraded to 1.36, `b` and `c` still 1.35
    /// (with the proxy's feature gate turned on, as an operator would during the rollout).
    Upgrade,
}

impl FromStr for Preset {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "default" => Ok(Self::Default),
            "upgrade" => Ok(Self::Upgrade),
            other => Err(format!("unknown preset {other:?} (known: default, upgrade)")),
        }
    }
}

/// One server of a cluster: its name, loopback address, version and extra kube-apiserver flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSpec {
    /// Short name (`a`, `b`, …); also the hostname the server ID derives from.
    pub name: String,
    /// The loopback address it listens on.
    pub ip: IpAddr,
    /// The fake's Kubernetes version.
    pub kubernetes_version: String,
    /// Extra flags, e.g. `--runtime-config=batch/v1=false`.
    pub extra_flags: Vec<String>,
    /// What this server serves differently (for the table).
    pub note: String,
    /// kubectl arguments the table suggests trying against this server (e.g. `get jobs`).
    pub try_command: String,
    /// A real kube-apiserver binary this member runs instead of a fake ([`real_member`]); its
    /// `kubernetes_version` is what the binary reports.
    pub binary: Option<std::path::PathBuf>,
}

impl Preset {
    /// The preset's name (its file in `examples/clusters/`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Upgrade => "upgrade",
        }
    }

    /// The servers of this preset.
    pub fn members(self) -> Vec<MemberSpec> {
        // The compiled-in example files; each is checked by a unit test.
        ClusterConfig::preset(self.name())
            .map(|config| config.members)
            .unwrap_or_default()
    }

    /// The servers of this preset as the code listed them before the presets became files (kept to
    /// check that the files describe the same clusters).
    #[cfg(test)]
    fn legacy_members(self) -> Vec<MemberSpec> {
        let member = |name: &str, last_octet: u8, version: &str, flags: &[&str], note: &str| MemberSpec {
            try_command: match self {
                Self::Default => "get jobs".to_owned(),
                Self::Upgrade => "get mutatingadmissionpolicies".to_owned(),
            },
            name: name.to_owned(),
            ip: IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, last_octet)),
            kubernetes_version: version.to_owned(),
            extra_flags: flags.iter().map(|f| (*f).to_owned()).collect(),
            note: note.to_owned(),
            binary: None,
        };
        match self {
            Self::Default => vec![
                member(
                    "a",
                    1,
                    "1.36",
                    &["--runtime-config=batch/v1=false"],
                    "batch/v1 disabled",
                ),
                member("b", 2, "1.36", &[], "all default APIs"),
            ],
            Self::Upgrade => {
                let gate = "--feature-gates=UnknownVersionInteroperabilityProxy=true";
                vec![
                    member(
                        "a",
                        1,
                        "1.36",
                        &[],
                        "upgraded: serves admissionregistration v1 MAP/MAPB",
                    ),
                    member("b", 2, "1.35", &[gate], "not yet upgraded"),
                    member("c", 3, "1.35", &[gate], "not yet upgraded"),
                ]
            }
        }
    }
}

/// The client [`Cluster::admin_client`] builds.
pub type AdminClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<HttpConnector>,
    http_body_util::Full<bytes::Bytes>,
>;

/// The bearer token every demo server accepts (for HTTP load tools); its user is `admin` in
/// `system:masters`.
pub const DEMO_TOKEN: &str = "kube-mvp-demo-token";

/// The static token file (kube-apiserver's CSV) every demo server reads.
pub(crate) const TOKEN_FILE: &str = "tokens.csv";

/// A running cluster of fakes.
pub struct Cluster {
    /// The servers, in the order of their specs.
    pub servers: Vec<(MemberSpec, RunningServer)>,
    /// The shared store.
    pub store: Arc<dyn Store>,
    /// Where the files are.
    pub dir: PathBuf,
    /// The load balancer in front, once [`Cluster::start_balancer`] started it.
    pub balancer: Option<RunningBalancer>,
    pki: certs::Pki,
    _tempdir: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("dir", &self.dir)
            .field("servers", &self.servers.len())
            .finish()
    }
}

/// Writes the PKI for `members` into `dir`, starts them on one shared store and waits until they are
/// usable: every server ready and every proxy knowing its peers. Only then are the kubeconfigs and,
/// last, `cluster.json` written, each atomically (a complete file or none): a script that waits for
/// `cluster.json` never sees a cluster that would answer a false 404.
pub async fn start_cluster(
    dir: Option<PathBuf>,
    members: Vec<MemberSpec>,
    port: u16,
) -> anyhow::Result<Cluster> {
    start_cluster_behind(dir, members, port, LoadBalancerKind::None).await
}

/// [`start_cluster`] with a load balancer of `lb` in front (on [`load_balancer::LB_IP`]:`port`),
/// started once the servers are usable and before the client files are written, so that
/// `cluster.json` names it and `DIR/cluster.kubeconfig` exists when it appears.
pub async fn start_cluster_behind(
    dir: Option<PathBuf>,
    members: Vec<MemberSpec>,
    port: u16,
    lb: LoadBalancerKind,
) -> anyhow::Result<Cluster> {
    if let Some(dir) = &dir {
        // A previous run's manifest would tell a waiting script that this cluster is up.
        remove_manifest(dir)?;
    }
    let mut cluster = launch_cluster(dir, members, port).await?;
    cluster
        .wait_until_peers_know_each_other(Duration::from_secs(10))
        .await?;
    cluster.start_balancer(lb, port).await?;
    cluster.write_client_files()?;
    Ok(cluster)
}

/// Writes the PKI for `members` into `dir` (with `tokens.csv` and `token`) and starts them on one
/// shared store, each ready; neither waits for the peers to know each other nor writes kubeconfigs
/// or `cluster.json` (see [`start_cluster`]). For clusters that are not meant to converge, such as
/// a wrong peer CA.
pub async fn launch_cluster(
    dir: Option<PathBuf>,
    members: Vec<MemberSpec>,
    port: u16,
) -> anyhow::Result<Cluster> {
    let PreparedDir { dir, pki, tempdir } = prepare_dir(dir, &members)?;
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut servers = Vec::with_capacity(members.len());
    for member in members {
        let options = member_options(&member, &dir, port)?;
        let server = crate::server::start(options, store.clone())
            .await
            .with_context(|| format!("failed to start server {}", member.name))?;
        servers.push((member, server));
    }
    for (member, server) in &servers {
        if !server.wait_ready(Duration::from_secs(10)).await {
            anyhow::bail!("server {} did not become ready", member.name);
        }
    }
    Ok(Cluster {
        servers,
        store,
        dir,
        balancer: None,
        pki,
        _tempdir: tempdir,
    })
}

/// A cluster's directory with its PKI, `tokens.csv` and `token` written.
pub(crate) struct PreparedDir {
    pub dir: PathBuf,
    pub pki: certs::Pki,
    pub tempdir: Option<tempfile::TempDir>,
}

/// Creates `dir` (a temporary directory when `None`) and writes the PKI for `members` (kubeadm's
/// file names), the static token file and the bare token into it.
pub(crate) fn prepare_dir(dir: Option<PathBuf>, members: &[MemberSpec]) -> anyhow::Result<PreparedDir> {
    let (dir, tempdir) = match dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("failed to create {}", dir.display()))?;
            (dir, None)
        }
        None => {
            let tempdir = tempfile::tempdir().context("failed to create a temporary directory")?;
            (tempdir.path().to_owned(), Some(tempdir))
        }
    };
    let spec = certs::PkiSpec {
        servers: members
            .iter()
            .map(|m| certs::ServerSpec {
                name: m.name.clone(),
                // The load balancer's address too, as kubeadm adds the control-plane endpoint to
                // every apiserver's certificate: a client of the balancer reaches any server.
                ips: vec![m.ip, load_balancer::LB_IP],
                dns: vec![],
            })
            .collect(),
        ..certs::PkiSpec::default()
    };
    let pki = certs::Pki::generate(&spec).context("failed to generate the cluster PKI")?;
    pki.write_to(&dir).context("failed to write the cluster PKI")?;
    let token_csv = dir.join(TOKEN_FILE);
    std::fs::write(
        &token_csv,
        format!("{DEMO_TOKEN},admin,admin,\"system:masters\"\n"),
    )
    .context("failed to write tokens.csv")?;
    std::fs::write(dir.join("token"), DEMO_TOKEN).context("failed to write token")?;
    Ok(PreparedDir { dir, pki, tempdir })
}

/// Removes `DIR/cluster.json` if it exists.
fn remove_manifest(dir: &Path) -> anyhow::Result<()> {
    let path = dir.join("cluster.json");
    match std::fs::remove_file(&path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            Err(err).with_context(|| format!("failed to remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Writes `contents` to `path` through a temporary file in the same directory renamed over it, so
/// readers see the old file, no file, or the whole new one, never a part.
fn write_atomically(path: &Path, contents: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let mut file = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("failed to create a temporary file in {}", dir.display()))?;
    file.write_all(contents)
        .and_then(|()| file.as_file().sync_all())
        .with_context(|| format!("failed to write {}", path.display()))?;
    file.persist(path)
        .with_context(|| format!("failed to write {}", path.display()))?;
    Ok(())
}

fn member_flags(member: &MemberSpec, dir: &Path, port: u16) -> Vec<String> {
    let paths = certs::PkiPaths::new(dir);
    let token_csv = dir.join(TOKEN_FILE);
    let p = |path: &Path| path.display().to_string();
    let mut flags = vec![
        format!("--kubernetes-version={}", member.kubernetes_version),
        format!("--hostname={}", member.name),
        format!("--bind-address={}", member.ip),
        format!("--secure-port={port}"),
        format!("--tls-cert-file={}", p(&paths.server_cert(&member.name))),
        format!("--tls-private-key-file={}", p(&paths.server_key(&member.name))),
        format!("--client-ca-file={}", p(&paths.ca_cert)),
        format!("--token-auth-file={}", p(&token_csv)),
        format!("--requestheader-client-ca-file={}", p(&paths.front_proxy_ca_cert)),
        "--requestheader-allowed-names=front-proxy-client".to_owned(),
        "--requestheader-username-headers=X-Remote-User".to_owned(),
        "--requestheader-uid-headers=X-Remote-Uid".to_owned(),
        "--requestheader-group-headers=X-Remote-Group".to_owned(),
        "--requestheader-extra-headers-prefix=X-Remote-Extra-".to_owned(),
        format!("--proxy-client-cert-file={}", p(&paths.front_proxy_client_cert)),
        format!("--proxy-client-key-file={}", p(&paths.front_proxy_client_key)),
        // kubeadm's: every server signs with sa.key and verifies with sa.pub, so a token one issues is
        // accepted by all.
        format!(
            "--service-account-issuer={}",
            crate::api::serviceaccount::DEFAULT_ISSUER
        ),
        format!("--service-account-key-file={}", p(&paths.service_account_pub)),
        format!(
            "--service-account-signing-key-file={}",
            p(&paths.service_account_key)
        ),
    ];
    // A flag given in the member's extra flags replaces the cluster's default for it (list flags would
    // otherwise accumulate, as kube-apiserver's do).
    let flag_name = |flag: &String| flag.split('=').next().unwrap_or_default().to_owned();
    let overridden: Vec<String> = member.extra_flags.iter().map(flag_name).collect();
    flags.retain(|flag| !overridden.contains(&flag_name(flag)));
    flags.extend(member.extra_flags.iter().cloned());
    flags
}

/// The command line of `member` in the cluster whose files are in `dir`, checked as the server would
/// check it. Every server whose Mixed Version Proxy gate is on gets the peer CA, as kubeadm users are
/// told to configure it; the cluster CA signs every serving certificate.
pub(crate) fn member_args(member: &MemberSpec, dir: &Path, port: u16) -> anyhow::Result<Vec<String>> {
    if member.binary.is_some() {
        let flags = member_flags(member, dir, port);
        return Ok(real_member::kube_apiserver_args(
            flags,
            member.ip,
            &dir.join("ca.crt"),
        ));
    }
    let mut args = member_flags(member, dir, port);
    let options = parse_member_flags(member, &args)?;
    if options.mvp_gate_enabled() && !args.iter().any(|a| a.starts_with("--peer-ca-file")) {
        args.push(format!("--peer-ca-file={}", dir.join("ca.crt").display()));
    }
    Ok(args)
}

fn parse_member_flags(member: &MemberSpec, args: &[String]) -> anyhow::Result<ServerOptions> {
    let flags = ServerFlags::from_args(args).map_err(|e| anyhow::anyhow!("server {}: {e}", member.name))?;
    flags
        .validate()
        .with_context(|| format!("server {}", member.name))
}

/// The validated options of `member` (see [`member_args`]).
fn member_options(member: &MemberSpec, dir: &Path, port: u16) -> anyhow::Result<ServerOptions> {
    parse_member_flags(member, &member_args(member, dir, port)?)
}

/// An HTTPS client presenting the admin certificate of `pki` (`system:masters`) and trusting its CA:
/// HTTP/2 when a server offers it, and, like client-go, no Nagle delay between a request's headers
/// and its body.
pub(crate) fn admin_client(pki: &certs::Pki) -> anyhow::Result<AdminClient> {
    Ok(admin_client_with(admin_tls_config(pki)?))
}

/// The TLS configuration of [`admin_client`]: the admin certificate of `pki`, trusting its CA.
pub(crate) fn admin_tls_config(pki: &certs::Pki) -> anyhow::Result<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca().cert_der())?;
    let admin = pki.admin();
    Ok(rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_client_auth_cert(vec![admin.cert_der()], admin.key_der())?)
}

/// [`admin_client`] with a TLS configuration built once by [`admin_tls_config`].
pub(crate) fn admin_client_with(config: rustls::ClientConfig) -> AdminClient {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(https)
}

/// Writes a kubeconfig per `(name, url)` and then `manifest` as `cluster.json`, each atomically, so
/// that a script waiting for `cluster.json` finds every file complete.
pub(crate) fn write_client_files(
    dir: &Path,
    pki: &certs::Pki,
    kubeconfigs: &[(String, String)],
    manifest: &serde_json::Value,
) -> anyhow::Result<()> {
    let paths = certs::PkiPaths::new(dir);
    for (name, url) in kubeconfigs {
        write_atomically(&paths.kubeconfig(name), pki.kubeconfig(url, name).as_bytes())
            .with_context(|| format!("failed to write the kubeconfig of {name}"))?;
    }
    let text = serde_json::to_string_pretty(manifest).context("failed to render cluster.json")?;
    write_atomically(&dir.join("cluster.json"), (text + "\n").as_bytes())
}

/// The table the demo prints: a row per server with what to try against it.
pub(crate) fn render_table(rows: &[(&MemberSpec, std::net::SocketAddr)], dir: &Path) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<5} {:<8} {:<22} {:<48} TRY",
        "NAME", "VERSION", "ADDRESS", "SERVES"
    );
    for (member, addr) in rows {
        let kubeconfig = dir.join(format!("{}.kubeconfig", member.name));
        let _ = writeln!(
            out,
            "{:<5} {:<8} {:<22} {:<48} kubectl --kubeconfig {} {}",
            member.name,
            member.kubernetes_version,
            addr,
            member.note,
            kubeconfig.display(),
            member.try_command
        );
    }
    out
}

impl Cluster {
    /// Waits until every server running the proxy resolves every other member that publishes a peer
    /// endpoint (each serves `v1/namespaces`) and that member's endpoint record exists, so that the
    /// first request after start-up is proxied rather than a false 404: a server is ready before its
    /// peers' endpoint records exist, and peer discovery then retries with backoff. Fails when peers
    /// cannot reach each other (e.g. a wrong `--peer-ca-file`).
    pub async fn wait_until_peers_know_each_other(&self, timeout: Duration) -> anyhow::Result<()> {
        let servers = &self.servers;
        let namespaces = mvp_core::GroupVersionResource::new("", "v1", "namespaces");
        let deadline = tokio::time::Instant::now() + timeout;
        for (member, server) in servers {
            let Some(resolver) = server.state().proxy_resolver() else {
                continue;
            };
            let others: Vec<&str> = servers
                .iter()
                .map(|(_, s)| s)
                .filter(|s| s.server_id() != server.server_id() && s.state().options.mvp_gate_enabled())
                .map(RunningServer::server_id)
                .collect();
            loop {
                let known = resolver.peers_serving(&namespaces);
                let mut reachable = true;
                for id in &others {
                    let key = format!("{}{id}", crate::controllers::peer_endpoint::PREFIX);
                    reachable &= matches!(server.state().store.get_internal(&key).await, Ok(Some(_)));
                }
                if reachable && others.iter().all(|id| known.iter().any(|k| k == id)) {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    anyhow::bail!(
                        "server {} did not discover its peers within {} s",
                        member.name,
                        timeout.as_secs()
                    );
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        Ok(())
    }

    /// `cluster.json`: `{"pid","servers":[{"name","url","kubernetesVersion","kubeconfig"}]}`, where
    /// `pid` is this process's (the `cluster` command's), so a script can tell this run's manifest
    /// from one a killed run left behind.
    pub fn manifest(&self) -> serde_json::Value {
        let servers: Vec<_> = self
            .servers
            .iter()
            .map(|(member, server)| {
                json!({
                    "name": member.name,
                    "url": server.url(),
                    "kubernetesVersion": member.kubernetes_version,
                    "kubeconfig": self.dir.join(format!("{}.kubeconfig", member.name)).display().to_string(),
                })
            })
            .collect();
        let mut manifest = json!({ "pid": std::process::id(), "servers": servers });
        if let Some(balancer) = &self.balancer {
            manifest["lb"] = balancer.manifest(&self.dir);
        }
        manifest
    }

    /// Writes each server's kubeconfig and then `cluster.json`, each atomically, so that a script
    /// waiting for `cluster.json` finds every file complete.
    pub fn write_client_files(&self) -> anyhow::Result<()> {
        let kubeconfigs: Vec<(String, String)> = self
            .servers
            .iter()
            .map(|(member, server)| (member.name.clone(), server.url()))
            .collect();
        if let Some(balancer) = &self.balancer {
            load_balancer::write_kubeconfig(&self.dir, &self.pki, balancer)?;
        }
        write_client_files(&self.dir, &self.pki, &kubeconfigs, &self.manifest())
    }

    /// Starts a load balancer of `kind` over the servers (nothing for [`LoadBalancerKind::None`]).
    pub async fn start_balancer(&mut self, kind: LoadBalancerKind, port: u16) -> anyhow::Result<()> {
        let backends = self
            .servers
            .iter()
            .map(|(member, server)| (member.name.clone(), server.local_addr()))
            .collect();
        self.balancer = RunningBalancer::start(kind, port, backends, &self.dir).await?;
        Ok(())
    }

    /// The table the demo prints.
    pub fn table(&self) -> String {
        let rows: Vec<(&MemberSpec, std::net::SocketAddr)> = self
            .servers
            .iter()
            .map(|(member, server)| (member, server.local_addr()))
            .collect();
        render_table(&rows, &self.dir)
    }

    /// Starts `member` on this cluster's store with the cluster's PKI and flags, as a restarted
    /// kube-apiserver process would come back (after [`RunningServer::shutdown`] or
    /// [`RunningServer::kill`] of an earlier run); the PKI must have its serving certificate. Waits
    /// until it is ready. Its kubeconfig is not rewritten.
    pub async fn start_member(&self, member: &MemberSpec, port: u16) -> anyhow::Result<RunningServer> {
        let options = member_options(member, &self.dir, port)?;
        let server = crate::server::start(options, self.store.clone())
            .await
            .with_context(|| format!("failed to start server {}", member.name))?;
        if !server.wait_ready(Duration::from_secs(10)).await {
            anyhow::bail!("server {} did not become ready", member.name);
        }
        Ok(server)
    }

    /// The cluster's PKI (clients build their TLS configuration from it).
    pub fn pki(&self) -> &certs::Pki {
        &self.pki
    }

    /// An HTTPS client of the cluster's servers presenting its admin certificate (`system:masters`)
    /// and trusting its CA: HTTP/2 when a server offers it, and, like client-go, no Nagle delay
    /// between a request's headers and its body.
    pub fn admin_client(&self) -> anyhow::Result<AdminClient> {
        admin_client(&self.pki)
    }

    /// Stops the `index`th server, gracefully or by a crash (see [`RunningServer::kill`]), and takes
    /// it out of the cluster; returns the port it listened on, for [`Cluster::put_member`].
    pub async fn stop_member(&mut self, index: usize, crash: bool) -> anyhow::Result<u16> {
        anyhow::ensure!(index < self.servers.len(), "no server #{index}");
        let (_, old) = self.servers.remove(index);
        let port = old.local_addr().port();
        if crash {
            old.kill().await;
        } else {
            old.shutdown().await;
        }
        Ok(port)
    }

    /// Starts `member` as the `index`th server on `port` (as an upgrade brings a kube-apiserver back,
    /// possibly at another version) and waits until it is ready.
    pub async fn put_member(&mut self, index: usize, member: MemberSpec, port: u16) -> anyhow::Result<()> {
        anyhow::ensure!(index <= self.servers.len(), "no server #{index}");
        let server = self.start_member(&member, port).await?;
        self.servers.insert(index, (member, server));
        Ok(())
    }

    /// Stops the load balancer, then every server gracefully.
    pub async fn shutdown(self) {
        if let Some(balancer) = self.balancer {
            balancer.shutdown().await;
        }
        for (_, server) in self.servers {
            server.shutdown().await;
        }
    }
}

/// The `cluster` subcommand: start, print, run until a signal, stop.
pub async fn run_cluster(args: ClusterArgs) -> anyhow::Result<()> {
    // Before anything else: a manifest a killed run left behind would tell a waiting script that
    // this run is up (its `pid` names the run that wrote it, for a script that read it earlier).
    if let Some(dir) = &args.dir {
        remove_manifest(dir)?;
    }
    let config = args.cluster_config()?;
    if matches!(config.run, RunMode::Processes | RunMode::Containers) {
        return run_process_cluster(args, config).await;
    }
    let signal = crate::shutdown_signal();
    tokio::pin!(signal);
    // A signal during start-up drops the half-started cluster, which stops its servers.
    let first = config
        .members
        .first()
        .map_or_else(|| "a".to_owned(), |m| m.name.clone());
    let cluster = tokio::select! {
        cluster = start_cluster_behind(args.dir.clone(), config.members, args.port, config.lb) => cluster?,
        () = &mut signal => return Ok(()),
    };
    let controllers = if !config.controller_manager {
        None
    } else {
        Some(
            controller_manager::InProcessControllerManager::start(
                &controller_manager_kubeconfig(&cluster.dir, &first, cluster.balancer.is_some()),
                ::controller_manager::ControllerManagerOptions::default(),
            )
            .await
            .context("failed to start the controller manager")?,
        )
    };
    print_banner(&cluster.table(), &cluster.dir);
    if let Some(balancer) = &cluster.balancer {
        println!("{}", balancer.banner(&cluster.dir));
    }
    signal.await;
    // Gone before the servers are: a script never finds the manifest of a cluster that is stopping.
    remove_manifest(&cluster.dir)?;
    if let Some(controllers) = controllers {
        controllers.stop().await;
    }
    cluster.shutdown().await;
    Ok(())
}

/// The kubeconfig the cluster's controller manager uses (admin credentials): the load balancer's
/// (`DIR/cluster.kubeconfig`) when the cluster has one, as kube-controller-manager reaches the
/// kube-apiservers of an HA control plane through its endpoint, so that its requests spread over
/// every server; the first server's with `lb: none`.
fn controller_manager_kubeconfig(dir: &Path, first: &str, balanced: bool) -> PathBuf {
    let paths = certs::PkiPaths::new(dir);
    if balanced {
        paths.kubeconfig(load_balancer::KUBECONFIG_NAME)
    } else {
        paths.kubeconfig(first)
    }
}

fn print_banner(table: &str, dir: &Path) {
    println!("{table}");
    println!(
        "files: {} (cluster.json, *.kubeconfig, token, PKI)",
        dir.display()
    );
    println!("press Ctrl-C to stop");
}

/// `cluster --etcd` / `--etcd-servers` / `run: processes`: every server its own process of this
/// binary on etcd; `run: containers`: its own container of this binary, etcd in a container too.
async fn run_process_cluster(args: ClusterArgs, config: ClusterConfig) -> anyhow::Result<()> {
    use crate::cluster::process::{EtcdBackend, ProcessCluster};
    anyhow::ensure!(
        cfg!(feature = "etcd"),
        "separate processes on etcd need a binary built with the etcd feature (cargo run --features etcd -p apiserver-fake -- cluster --etcd)"
    );
    let backend = match config.store {
        StoreChoice::ExistingEtcd(servers) => EtcdBackend::Existing(servers),
        StoreChoice::PrivateEtcd | StoreChoice::Memory => EtcdBackend::Private,
    };
    let binary = std::env::current_exe().context("cannot find this binary to start its servers")?;
    let signal = crate::shutdown_signal();
    tokio::pin!(signal);
    let first = config
        .members
        .first()
        .map_or_else(|| "a".to_owned(), |m| m.name.clone());
    let start = async {
        if config.run == RunMode::Containers {
            ProcessCluster::start_in_containers(
                &binary,
                args.dir.clone(),
                config.members,
                args.port,
                &args.etcd_prefix,
                config.lb,
                Vec::new(),
            )
            .await
        } else {
            ProcessCluster::start_behind(
                &binary,
                args.dir.clone(),
                config.members,
                args.port,
                backend,
                &args.etcd_prefix,
                config.lb,
            )
            .await
        }
    };
    let cluster = tokio::select! {
        cluster = start => cluster?,
        () = &mut signal => return Ok(()),
    };
    let controllers = if !config.controller_manager {
        None
    } else {
        Some(controller_manager::ControllerManagerProcess::spawn(
            &binary,
            cluster.dir(),
            &controller_manager_kubeconfig(cluster.dir(), &first, cluster.balancer().is_some()),
        )?)
    };
    print_banner(&cluster.table(), cluster.dir());
    if cluster.in_containers() {
        println!(
            "etcd: {} (in a container; servers in containers on their network, ports published on the addresses above)",
            cluster.etcd_servers().join(",")
        );
    } else {
        println!("etcd: {}", cluster.etcd_servers().join(","));
    }
    if let Some(banner) = cluster.balancer_banner() {
        println!("{banner}");
    }
    signal.await;
    remove_manifest(cluster.dir())?;
    if let Some(controllers) = controllers {
        controllers.stop().await;
    }
    cluster.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preset_files_describe_the_presets_as_the_code_did() {
        for preset in [Preset::Default, Preset::Upgrade] {
            assert_eq!(preset.members(), preset.legacy_members(), "{preset:?}");
        }
    }
}
