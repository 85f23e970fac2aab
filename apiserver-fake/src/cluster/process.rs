//! A cluster of fakes as a real control plane runs: every server its own OS process of this binary,
//! with kube-apiserver's flags, sharing one etcd (a private one the cluster starts, or an existing one).
//!
//! `apiserver-fake cluster --etcd` runs on this, and so do tests that crash, stall or restart a server
//! as an operator or a kernel would: [`ProcessCluster::kill`] (SIGKILL), [`ProcessCluster::stall`] and
//! [`ProcessCluster::resume`] (SIGSTOP/SIGCONT), [`ProcessCluster::stop`] (SIGTERM, graceful) and
//! [`ProcessCluster::restart`] (possibly at another version). Each server's log is `DIR/NAME.log`.
//!
//! Every server process is tied to the cluster's process by a pipe on its standard input
//! (`--exit-when-stdin-closes`): if the cluster's process dies, even by SIGKILL, its servers shut
//! down instead of lingering on their ports.
//!
//! The same cluster runs its servers in Docker containers with [`ProcessCluster::start_in_containers`]
//! (see [`crate::cluster::containers`]): each server process is then a `docker run` whose container
//! is stopped, killed or paused through Docker, and etcd runs in a container too.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use tokio::process::{Child, Command};

use crate::cluster::containers::Containers;
use crate::cluster::etcd_process::EtcdProcess;
use crate::cluster::load_balancer::{self, LoadBalancerKind, RunningBalancer};
use crate::cluster::{AdminClient, MemberSpec, admin_client, member_args, write_client_files};

/// Where a process cluster keeps its objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EtcdBackend {
    /// A private etcd started by the cluster, its data in `DIR/etcd` (kept across runs).
    Private,
    /// An existing etcd at these client URLs (`--etcd-servers`).
    Existing(Vec<String>),
}

/// Where the servers run and keep their objects.
enum Backend {
    /// Processes on this etcd.
    Etcd(EtcdBackend),
    /// Containers on etcd in a container; these paths mounted too.
    Containers(Vec<PathBuf>),
}

/// One server process.
#[derive(Debug)]
struct Member {
    spec: MemberSpec,
    port: u16,
    child: Option<Child>,
}

/// A running cluster of server processes (see the module docs). Dropping it kills every process it
/// started.
#[derive(Debug)]
pub struct ProcessCluster {
    members: Vec<Member>,
    etcd: Option<EtcdProcess>,
    etcd_servers: Vec<String>,
    etcd_prefix: String,
    binary: PathBuf,
    dir: PathBuf,
    pki: certs::Pki,
    client: AdminClient,
    ready_timeout: Duration,
    balancer: Option<RunningBalancer>,
    /// `Some` when the servers run in containers.
    containers: Option<Containers>,
    _tempdir: Option<tempfile::TempDir>,
}

/// Fails with one line when the etcd at `servers` does not answer, before any server is started.
async fn check_etcd(servers: &[String], prefix: &str) -> anyhow::Result<()> {
    #[cfg(feature = "etcd")]
    {
        let config = crate::store::EtcdConfig {
            servers: servers.to_vec(),
            prefix: prefix.to_owned(),
        };
        crate::store::EtcdStore::connect(&config, Duration::from_secs(5))
            .await
            .with_context(|| format!("failed to reach etcd at {}", servers.join(",")))?;
        Ok(())
    }
    #[cfg(not(feature = "etcd"))]
    {
        let _ = (servers, prefix);
        anyhow::bail!("this binary was built without etcd support (cargo build --features etcd)")
    }
}

impl ProcessCluster {
    /// Writes the PKI for `members` into `dir` (a temporary directory when `None`), starts etcd (or
    /// uses the existing one) and one process of `binary` per member on `port` (0: a free port each),
    /// and waits until every server's `/readyz` says ok: a ready server's peers have fetched its
    /// discovery, so once all are ready every proxy knows its peers. Then the kubeconfigs and, last,
    /// `cluster.json` are written, each atomically.
    pub async fn start(
        binary: &Path,
        dir: Option<PathBuf>,
        members: Vec<MemberSpec>,
        port: u16,
        backend: EtcdBackend,
        etcd_prefix: &str,
    ) -> anyhow::Result<Self> {
        Self::start_behind(
            binary,
            dir,
            members,
            port,
            backend,
            etcd_prefix,
            LoadBalancerKind::None,
        )
        .await
    }

    /// [`Self::start`] with a load balancer of `lb` in front (on [`load_balancer::LB_IP`]:`port`),
    /// started once every server is ready and before the client files are written.
    pub async fn start_behind(
        binary: &Path,
        dir: Option<PathBuf>,
        members: Vec<MemberSpec>,
        port: u16,
        backend: EtcdBackend,
        etcd_prefix: &str,
        lb: LoadBalancerKind,
    ) -> anyhow::Result<Self> {
        Self::start_on(
            binary,
            dir,
            members,
            port,
            Backend::Etcd(backend),
            etcd_prefix,
            lb,
        )
        .await
    }

    /// [`Self::start_behind`] with every server in a Docker container of this binary and etcd in a
    /// container too, on a network of the cluster's own (see [`crate::cluster::containers`]);
    /// `mounts` are absolute paths (besides the cluster's directory) the servers' flags name.
    pub async fn start_in_containers(
        binary: &Path,
        dir: Option<PathBuf>,
        members: Vec<MemberSpec>,
        port: u16,
        etcd_prefix: &str,
        lb: LoadBalancerKind,
        mounts: Vec<PathBuf>,
    ) -> anyhow::Result<Self> {
        Self::start_on(
            binary,
            dir,
            members,
            port,
            Backend::Containers(mounts),
            etcd_prefix,
            lb,
        )
        .await
    }

    async fn start_on(
        binary: &Path,
        dir: Option<PathBuf>,
        members: Vec<MemberSpec>,
        port: u16,
        backend: Backend,
        etcd_prefix: &str,
        lb: LoadBalancerKind,
    ) -> anyhow::Result<Self> {
        let prepared = crate::cluster::prepare_dir(dir, &members)?;
        let (dir, pki, tempdir) = (prepared.dir, prepared.pki, prepared.tempdir);
        let (backend, containers) = match backend {
            Backend::Etcd(backend) => (backend, None),
            Backend::Containers(mounts) => {
                let dir = std::path::absolute(&dir).context("no absolute path for the cluster directory")?;
                let containers = Containers::start(binary, &dir, mounts).await?;
                let url = containers.etcd_url().to_owned();
                (EtcdBackend::Existing(vec![url]), Some(containers))
            }
        };
        let (etcd, etcd_servers) = match backend {
            EtcdBackend::Existing(servers) if containers.is_some() => (None, servers),
            EtcdBackend::Private => {
                // Starting etcd polls its health with blocking sleeps: off the async workers.
                let (data, log) = (dir.join("etcd"), dir.join("etcd.log"));
                let etcd = tokio::task::spawn_blocking(move || {
                    EtcdProcess::start(&data, std::net::Ipv4Addr::LOCALHOST, 0, Some(&log), true)
                })
                .await
                .context("failed to start etcd")?
                .context("failed to start etcd")?;
                let url = etcd.client_url().to_owned();
                (Some(etcd), vec![url])
            }
            EtcdBackend::Existing(servers) => {
                check_etcd(&servers, etcd_prefix).await?;
                (None, servers)
            }
        };
        let client = admin_client(&pki)?;
        let mut cluster = Self {
            members: Vec::with_capacity(members.len()),
            etcd,
            etcd_servers,
            etcd_prefix: etcd_prefix.to_owned(),
            binary: binary.to_owned(),
            dir,
            pki,
            client,
            ready_timeout: Duration::from_secs(30),
            balancer: None,
            containers,
            _tempdir: tempdir,
        };
        for spec in members {
            let port = if port == 0 {
                crate::cluster::etcd_process::free_port(spec.ip)
                    .with_context(|| format!("no free port on {}", spec.ip))?
            } else {
                port
            };
            let mut member = Member {
                spec,
                port,
                child: None,
            };
            member.child = Some(cluster.spawn(&member)?);
            cluster.members.push(member);
        }
        for index in 0..cluster.members.len() {
            cluster.wait_ready(index).await?;
        }
        let backends = (0..cluster.members.len())
            .map(|i| {
                let m = &cluster.members[i];
                (m.spec.name.clone(), SocketAddr::new(m.spec.ip, m.port))
            })
            .collect();
        cluster.balancer = RunningBalancer::start(lb, port, backends, &cluster.dir).await?;
        cluster.write_client_files()?;
        Ok(cluster)
    }

    fn spawn(&self, member: &Member) -> anyhow::Result<Child> {
        let mut args = member_args(&member.spec, &self.dir, member.port)?;
        args.push(format!("--etcd-servers={}", self.etcd_servers.join(",")));
        args.push(format!("--etcd-prefix={}", self.etcd_prefix));
        let log_path = self.dir.join(format!("{}.log", member.spec.name));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("failed to open {}", log_path.display()))?;
        let mut command = match (&self.containers, &member.spec.binary) {
            (Some(containers), _) => {
                let mut command = containers.run_command(
                    &member.spec.name,
                    SocketAddr::new(member.spec.ip, member.port),
                    &args,
                );
                command.stdin(Stdio::piped());
                command
            }
            // A real kube-apiserver, started through this binary in a host name of its own
            // (real_member::exec_member).
            (None, Some(binary)) => {
                let mut command = Command::new(&self.binary);
                command
                    .args(["exec-member", "--hostname", &member.spec.name, "--"])
                    .arg(binary)
                    .args(&args)
                    .stdin(Stdio::null());
                command
            }
            (None, None) => {
                let mut command = Command::new(&self.binary);
                command
                    .arg("--exit-when-stdin-closes")
                    .args(&args)
                    .stdin(Stdio::piped());
                command
            }
        };
        let binary = member.spec.binary.as_deref().unwrap_or(&self.binary);
        command
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| {
                format!(
                    "failed to start server {} ({})",
                    member.spec.name,
                    binary.display()
                )
            })
    }

    fn index(&self, name: &str) -> anyhow::Result<usize> {
        self.members
            .iter()
            .position(|m| m.spec.name == name)
            .with_context(|| format!("no server {name:?} in the cluster"))
    }

    /// Waits until the `index`th server answers `/readyz` 200, failing early when its process exits.
    async fn wait_ready(&mut self, index: usize) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + self.ready_timeout;
        let url = self.url_of(index);
        loop {
            if self.probe(&url, "/readyz").await == Some(http::StatusCode::OK) {
                return Ok(());
            }
            let member = &mut self.members[index];
            let name = member.spec.name.clone();
            if let Some(child) = member.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                let log = std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default();
                let last = log.lines().last().unwrap_or("no output");
                anyhow::bail!("server {name} exited ({status}) before it was ready: {last}");
            }
            if tokio::time::Instant::now() >= deadline {
                anyhow::bail!(
                    "server {name} did not become ready within {} s",
                    self.ready_timeout.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The status of `GET path` on `url` as the admin, or `None` when there is no answer within a
    /// second.
    async fn probe(&self, url: &str, path: &str) -> Option<http::StatusCode> {
        let request = http::Request::get(format!("{url}{path}"))
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .ok()?;
        let response = tokio::time::timeout(Duration::from_secs(1), self.client.request(request))
            .await
            .ok()?
            .ok()?;
        Some(response.status())
    }

    fn url_of(&self, index: usize) -> String {
        let member = &self.members[index];
        format!("https://{}", SocketAddr::new(member.spec.ip, member.port))
    }

    /// `https://ip:port` of server `name`.
    pub fn url(&self, name: &str) -> anyhow::Result<String> {
        Ok(self.url_of(self.index(name)?))
    }

    /// The process ID of server `name` (`None` while it is not running).
    pub fn pid(&self, name: &str) -> anyhow::Result<Option<u32>> {
        Ok(self.members[self.index(name)?].child.as_ref().and_then(Child::id))
    }

    /// The etcd client URLs the servers use.
    pub fn etcd_servers(&self) -> &[String] {
        &self.etcd_servers
    }

    /// Where the files are.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cluster's PKI.
    pub fn pki(&self) -> &certs::Pki {
        &self.pki
    }

    /// The names of the servers, in order.
    pub fn names(&self) -> Vec<&str> {
        self.members.iter().map(|m| m.spec.name.as_str()).collect()
    }

    fn signal(&self, name: &str, signal: Signal) -> anyhow::Result<()> {
        let pid = self
            .pid(name)?
            .with_context(|| format!("server {name} is not running"))?;
        let pid = i32::try_from(pid).context("pid out of range")?;
        kill(Pid::from_raw(pid), signal).with_context(|| format!("failed to send {signal} to server {name}"))
    }

    /// Crashes server `name` (SIGKILL, `docker kill` in a container) and reaps it: nothing it
    /// published is cleaned up.
    pub async fn kill(&mut self, name: &str) -> anyhow::Result<()> {
        let index = self.index(name)?;
        if let Some(containers) = &self.containers
            && let Some(mut child) = self.members[index].child.take()
        {
            containers.kill(name).await?;
            // `docker run` ends with its container.
            if tokio::time::timeout(Duration::from_secs(10), child.wait())
                .await
                .is_err()
            {
                child.kill().await?;
            }
            return Ok(());
        }
        if let Some(mut child) = self.members[index].child.take() {
            child
                .kill()
                .await
                .with_context(|| format!("failed to kill server {name}"))?;
        }
        Ok(())
    }

    /// Stalls server `name` (SIGSTOP): its sockets stay open but nothing answers, as a server stuck
    /// in a long GC pause or on a frozen VM. Not for containers: see [`Self::pause`].
    pub fn stall(&self, name: &str) -> anyhow::Result<()> {
        self.signal(name, Signal::SIGSTOP)
    }

    /// Lets a stalled server `name` run again (SIGCONT).
    pub fn resume(&self, name: &str) -> anyhow::Result<()> {
        self.signal(name, Signal::SIGCONT)
    }

    /// Stalls server `name` however it runs: SIGSTOP for a process, `docker pause` for a container.
    pub async fn pause(&self, name: &str) -> anyhow::Result<()> {
        match &self.containers {
            Some(containers) => containers.pause(name).await,
            None => self.stall(name),
        }
    }

    /// Undoes [`Self::pause`].
    pub async fn unpause(&self, name: &str) -> anyhow::Result<()> {
        match &self.containers {
            Some(containers) => containers.unpause(name).await,
            None => self.resume(name),
        }
    }

    /// Whether the servers run in containers.
    pub fn in_containers(&self) -> bool {
        self.containers.is_some()
    }

    /// Stops server `name` gracefully (SIGTERM, as kubelet stops a static pod) and waits for its
    /// process to exit (SIGKILL after 10 s).
    pub async fn stop(&mut self, name: &str) -> anyhow::Result<()> {
        let index = self.index(name)?;
        if let Some(containers) = &self.containers
            && let Some(mut child) = self.members[index].child.take()
        {
            let _ = containers.unpause(name).await;
            containers.stop(name).await?;
            if tokio::time::timeout(Duration::from_secs(10), child.wait())
                .await
                .is_err()
            {
                child.kill().await?;
            }
            return Ok(());
        }
        // A stalled process would never handle SIGTERM.
        let _ = self.signal(name, Signal::SIGCONT);
        self.signal(name, Signal::SIGTERM)?;
        if let Some(mut child) = self.members[index].child.take()
            && tokio::time::timeout(Duration::from_secs(10), child.wait())
                .await
                .is_err()
        {
            child.kill().await?;
        }
        Ok(())
    }

    /// Starts server `name` again on its address after [`Self::kill`] or [`Self::stop`], at
    /// `kubernetes_version` when given (a rolling upgrade), and waits until it is ready.
    pub async fn restart(&mut self, name: &str, kubernetes_version: Option<&str>) -> anyhow::Result<()> {
        let index = self.index(name)?;
        anyhow::ensure!(
            self.members[index].child.is_none(),
            "server {name} is still running: kill or stop it first"
        );
        if let Some(version) = kubernetes_version {
            if let Some(binary) = &self.members[index].spec.binary
                && version != self.members[index].spec.kubernetes_version
            {
                anyhow::bail!(
                    "server {name} runs {} (a kube-apiserver {}): its version is the binary's",
                    binary.display(),
                    self.members[index].spec.kubernetes_version
                );
            }
            self.members[index].spec.kubernetes_version = version.to_owned();
        }
        self.start_member(index).await
    }

    /// Starts the server `member` names again after [`Self::kill`] or [`Self::stop`], on its address,
    /// as `member` says from now on: its version, flags, and whether a real kube-apiserver binary runs
    /// it (a rolling upgrade whose servers become real ones); waits until it is ready.
    pub async fn restart_as(&mut self, member: MemberSpec) -> anyhow::Result<()> {
        let index = self.index(&member.name)?;
        anyhow::ensure!(
            self.members[index].child.is_none(),
            "server {} is still running: kill or stop it first",
            member.name
        );
        self.members[index].spec = member;
        self.start_member(index).await
    }

    async fn start_member(&mut self, index: usize) -> anyhow::Result<()> {
        let child = self.spawn(&self.members[index])?;
        self.members[index].child = Some(child);
        self.wait_ready(index).await
    }

    /// `cluster.json`: every server's `name`, `url`, `kubernetesVersion`, `kubeconfig`, `pid` (and `binary`
    /// for a real kube-apiserver), the
    /// `etcd` client URL, and the `pid` of this process (the `cluster` command's), so a script can tell
    /// this run's manifest from one a killed run left behind.
    pub fn manifest(&self) -> serde_json::Value {
        let servers: Vec<_> = self
            .members
            .iter()
            .enumerate()
            .map(|(index, member)| {
                let mut server = json!({
                    "name": member.spec.name,
                    "url": self.url_of(index),
                    "kubernetesVersion": member.spec.kubernetes_version,
                    "kubeconfig": self.dir.join(format!("{}.kubeconfig", member.spec.name)).display().to_string(),
                    "pid": member.child.as_ref().and_then(Child::id),
                });
                // A real kube-apiserver (`binary:` in the config file).
                if let Some(binary) = &member.spec.binary {
                    server["binary"] = json!(binary.display().to_string());
                }
                server
            })
            .collect();
        let mut manifest =
            json!({ "pid": std::process::id(), "servers": servers, "etcd": self.etcd_servers.join(",") });
        if let Some(balancer) = &self.balancer {
            manifest["lb"] = balancer.manifest(&self.dir);
        }
        manifest
    }

    /// The load balancer's banner line, when there is one.
    pub fn balancer_banner(&self) -> Option<String> {
        self.balancer.as_ref().map(|b| b.banner(&self.dir))
    }

    /// The load balancer in front, if any.
    pub fn balancer(&self) -> Option<&RunningBalancer> {
        self.balancer.as_ref()
    }

    fn write_client_files(&self) -> anyhow::Result<()> {
        let kubeconfigs: Vec<(String, String)> = (0..self.members.len())
            .map(|index| (self.members[index].spec.name.clone(), self.url_of(index)))
            .collect();
        if let Some(balancer) = &self.balancer {
            load_balancer::write_kubeconfig(&self.dir, &self.pki, balancer)?;
        }
        write_client_files(&self.dir, &self.pki, &kubeconfigs, &self.manifest())
    }

    /// The table the demo prints.
    pub fn table(&self) -> String {
        let rows: Vec<(&MemberSpec, SocketAddr)> = self
            .members
            .iter()
            .map(|m| (&m.spec, SocketAddr::new(m.spec.ip, m.port)))
            .collect();
        crate::cluster::render_table(&rows, &self.dir)
    }

    /// Stops every server gracefully (in parallel), then etcd if the cluster started it.
    pub async fn shutdown(mut self) {
        if let Some(balancer) = self.balancer.take() {
            balancer.shutdown().await;
        }
        for member in &self.members {
            if let Some(pid) = member
                .child
                .as_ref()
                .and_then(Child::id)
                .and_then(|p| i32::try_from(p).ok())
            {
                // `docker run` passes SIGTERM on to its container.
                let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
                let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
            }
        }
        if let Some(containers) = &self.containers {
            for member in &self.members {
                if member.child.is_some() {
                    let _ = containers.unpause(&member.spec.name).await;
                }
            }
        }
        for member in &mut self.members {
            if let Some(mut child) = member.child.take()
                && tokio::time::timeout(Duration::from_secs(10), child.wait())
                    .await
                    .is_err()
            {
                let _ = child.kill().await;
            }
        }
        drop(self.etcd.take());
        // Removes what is left of the containers (etcd's) and the network.
        drop(self.containers.take());
    }
}
