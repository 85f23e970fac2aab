//! [`Cluster`]: a running `apiserver-fake cluster`, read through the `cluster.json` it writes.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::kubectl::Kubectl;
use crate::process::{ClusterProcess, Signal, send};

/// One server, as `cluster.json` names it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Server {
    /// Its name.
    pub name: String,
    /// Its HTTPS base URL (`https://127.0.0.N:PORT`).
    pub url: String,
    /// The Kubernetes minor version it serves (`"1.36"`).
    pub kubernetes_version: String,
    /// Its admin kubeconfig (system:masters).
    pub kubeconfig: PathBuf,
    /// Its own process, when it has one (`Run::Processes`).
    #[serde(default)]
    pub pid: Option<u32>,
}

/// The load balancer, as `cluster.json` names it.
#[derive(Debug, Clone, Deserialize)]
#[non_exhaustive]
pub struct Balancer {
    /// `embedded` or `haproxy`.
    pub kind: String,
    /// Its HTTPS base URL (every server's certificate carries its address).
    pub url: String,
    /// An admin kubeconfig pointing at it.
    pub kubeconfig: PathBuf,
    /// HAProxy's stats page, if any.
    #[serde(default)]
    pub stats: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Manifest {
    servers: Vec<Server>,
    #[serde(default)]
    lb: Option<Balancer>,
    #[serde(default)]
    etcd: Option<String>,
}

/// The cluster's directory: a temporary one removed with the cluster, or the caller's.
#[derive(Debug)]
enum Dir {
    Temporary(tempfile::TempDir),
    Kept(PathBuf),
}

/// A running cluster of fakes. Dropping it (or [`Cluster::stop`]) stops the `cluster` process, which
/// stops every server, etcd, the balancer and any containers; then its temporary directory goes.
#[derive(Debug)]
pub struct Cluster {
    process: Option<ClusterProcess>,
    // Declared after `process`: the directory is removed only once the process is gone.
    dir: Dir,
    servers: Vec<Server>,
    balancer: Option<Balancer>,
    etcd: Option<String>,
}

impl Cluster {
    pub(crate) async fn start(
        binary: PathBuf,
        dir: Option<PathBuf>,
        config: String,
        timeout: Duration,
    ) -> Result<Self> {
        let dir = match dir {
            Some(dir) => {
                std::fs::create_dir_all(&dir)
                    .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
                Dir::Kept(dir)
            }
            None => Dir::Temporary(
                tempfile::Builder::new()
                    .prefix("kube-mvp-testing-")
                    .tempdir()
                    .map_err(|e| Error::io("create a temporary directory", e))?,
            ),
        };
        let path = match &dir {
            Dir::Temporary(temp) => temp.path().to_owned(),
            Dir::Kept(path) => path.clone(),
        };
        let config_path = path.join("kube-mvp-testing.yaml");
        std::fs::write(&config_path, config)
            .map_err(|e| Error::io(format!("write {}", config_path.display()), e))?;
        let mut process = ClusterProcess::start(
            &binary,
            &path,
            &[std::ffi::OsStr::new("--config"), config_path.as_os_str()],
        )?;
        let manifest = process.wait_for_manifest(timeout).await?;
        let manifest: Manifest = serde_json::from_value(manifest).map_err(|e| Error::Manifest {
            path: path.join("cluster.json"),
            message: e.to_string(),
        })?;
        Ok(Self {
            process: Some(process),
            dir,
            servers: manifest.servers,
            balancer: manifest.lb,
            etcd: manifest.etcd,
        })
    }

    /// The cluster's directory: PKI (`ca.crt`, `admin.crt`, …), kubeconfigs, `token`, `cluster.json`.
    pub fn dir(&self) -> &Path {
        match &self.dir {
            Dir::Temporary(temp) => temp.path(),
            Dir::Kept(path) => path,
        }
    }

    /// The `cluster` command's output (its table, then its log).
    pub fn log_path(&self) -> PathBuf {
        self.dir().join("cluster.log")
    }

    /// The servers, in the builder's order.
    pub fn servers(&self) -> &[Server] {
        &self.servers
    }

    /// Server `name`.
    pub fn server(&self, name: &str) -> Result<&Server> {
        self.servers
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| Error::UnknownServer(name.to_owned()))
    }

    /// The etcd client URLs (comma-separated) the servers keep their objects in, when the store is
    /// etcd (`Store::Etcd`: the private etcd the cluster started; in containers, its URL on the
    /// cluster's Docker network).
    pub fn etcd(&self) -> Option<&str> {
        self.etcd.as_deref()
    }

    /// The load balancer, unless the cluster has none.
    pub fn balancer(&self) -> Option<&Balancer> {
        self.balancer.as_ref()
    }

    /// The bearer token every server accepts (a system:masters user), for plain HTTP tools.
    pub fn token(&self) -> Result<String> {
        let path = self.dir().join("token");
        std::fs::read_to_string(&path)
            .map(|t| t.trim().to_owned())
            .map_err(|e| Error::io(format!("read {}", path.display()), e))
    }

    /// A kube-rs client of server `name`, as its admin.
    pub async fn client(&self, name: &str) -> Result<kube::Client> {
        kube_client(&self.server(name)?.kubeconfig, name).await
    }

    /// A kube-rs client of the load balancer (`None` without one).
    pub async fn balancer_client(&self) -> Result<Option<kube::Client>> {
        match &self.balancer {
            Some(lb) => kube_client(&lb.kubeconfig, "the load balancer").await.map(Some),
            None => Ok(None),
        }
    }

    /// kubectl against server `name`, or `None` (after printing why the test is skipped) without a
    /// kubectl ≥ 1.28; see [`Kubectl::find`].
    pub fn kubectl(&self, name: &str) -> Result<Option<Kubectl>> {
        let kubeconfig = self.server(name)?.kubeconfig.clone();
        Ok(Kubectl::find().map(|binary| Kubectl::new(binary, kubeconfig, self.dir())))
    }

    /// kubectl through the load balancer, or `None` (no kubectl, or no balancer).
    pub fn balancer_kubectl(&self) -> Option<Kubectl> {
        let kubeconfig = self.balancer.as_ref()?.kubeconfig.clone();
        Kubectl::find().map(|binary| Kubectl::new(binary, kubeconfig, self.dir()))
    }

    /// Crashes server `name` (SIGKILL). Needs [`crate::Run::Processes`].
    pub fn kill(&self, name: &str) -> Result<()> {
        self.signal(name, "kill", Signal::Kill)
    }

    /// Stalls server `name` (SIGSTOP): it keeps its connections and answers nothing. Needs
    /// [`crate::Run::Processes`].
    pub fn pause(&self, name: &str) -> Result<()> {
        self.signal(name, "pause", Signal::Stop)
    }

    /// Lets a paused server `name` go on (SIGCONT).
    pub fn resume(&self, name: &str) -> Result<()> {
        self.signal(name, "resume", Signal::Cont)
    }

    fn signal(&self, name: &str, action: &'static str, signal: Signal) -> Result<()> {
        let server = self.server(name)?;
        let pid = server.pid.ok_or_else(|| Error::Fault {
            action,
            server: name.to_owned(),
            why: "it has no process of its own (start the cluster with Run::Processes)".to_owned(),
        })?;
        send(pid, signal).map_err(|why| Error::Fault {
            action,
            server: name.to_owned(),
            why,
        })
    }

    /// Stops the cluster (SIGTERM, so it removes its containers and balancer; SIGKILL after
    /// [`crate::process::STOP_GRACE`]) and waits for the `cluster` process to exit: how it exited
    /// (success when it cleaned up on SIGTERM), `None` if that could not be learnt.
    pub async fn stop(mut self) -> Option<ExitStatus> {
        let mut process = self.process.take()?;
        // Waiting is a blocking poll; keep it off the runtime's worker.
        tokio::task::spawn_blocking(move || process.stop().ok())
            .await
            .ok()
            .flatten()
    }
}

async fn kube_client(kubeconfig: &Path, what: &str) -> Result<kube::Client> {
    let error = |message: String| Error::KubeClient {
        what: what.to_owned(),
        message,
    };
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| error(e.to_string()))?;
    let options = kube::config::KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| error(e.to_string()))?;
    kube::Client::try_from(config).map_err(|e| error(e.to_string()))
}
