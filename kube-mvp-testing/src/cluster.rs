//! [`Cluster`]: a running `apiserver-fake cluster`, read through the `cluster.json` it writes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::eventually::POLL_INTERVAL;
use crate::kubectl::Kubectl;

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
    child: Option<Child>,
    // Declared after `child`: the directory is removed only once the process is gone.
    dir: Dir,
    servers: Vec<Server>,
    balancer: Option<Balancer>,
}

/// How long a stop waits for the `cluster` process to clean up after SIGTERM before killing it.
const STOP_GRACE: Duration = Duration::from_secs(30);

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
        let log_path = path.join("cluster.log");
        let log = std::fs::File::create(&log_path)
            .map_err(|e| Error::io(format!("create {}", log_path.display()), e))?;
        let log_err = log
            .try_clone()
            .map_err(|e| Error::io(format!("open {}", log_path.display()), e))?;
        let child = Command::new(&binary)
            .args(["cluster", "--port", "0", "--dir"])
            .arg(&path)
            .arg("--config")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| Error::io(format!("run {}", binary.display()), e))?;
        let mut cluster = Self {
            child: Some(child),
            dir,
            servers: Vec::new(),
            balancer: None,
        };
        let manifest = cluster.wait_for_manifest(timeout).await?;
        cluster.servers = manifest.servers;
        cluster.balancer = manifest.lb;
        Ok(cluster)
    }

    /// Waits for `cluster.json` (written atomically, last, once the cluster is up), failing at once
    /// when the process exits first.
    async fn wait_for_manifest(&mut self, timeout: Duration) -> Result<Manifest> {
        let path = self.dir().join("cluster.json");
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Ok(text) = std::fs::read_to_string(&path) {
                return serde_json::from_str(&text).map_err(|e| Error::Manifest {
                    path,
                    message: e.to_string(),
                });
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(Error::ClusterExited {
                    status: status.to_string(),
                    log: self.log_tail(3),
                });
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!("{} (the cluster's log: {})", path.display(), self.log_tail(3)),
                    seconds: timeout.as_secs(),
                });
            }
            tokio::time::sleep(POLL_INTERVAL).await; // poll interval
        }
    }

    /// The last `lines` non-empty lines of the cluster's log, joined by ` | `.
    fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let tail: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        tail[tail.len().saturating_sub(lines)..].join(" | ")
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

    /// Stops the cluster (SIGTERM, so it removes its containers and balancer; SIGKILL after 30 s) and
    /// waits for the `cluster` process to exit.
    pub async fn stop(mut self) {
        if let Some(mut child) = self.child.take() {
            // Waiting is a blocking poll; keep it off the runtime's worker.
            let _ = tokio::task::spawn_blocking(move || stop_child(&mut child)).await;
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            stop_child(&mut child);
        }
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

#[derive(Clone, Copy)]
enum Signal {
    Kill,
    Stop,
    Cont,
    Term,
}

#[cfg(unix)]
fn send(pid: u32, signal: Signal) -> std::result::Result<(), String> {
    use nix::sys::signal::{Signal as S, kill};
    let pid = i32::try_from(pid).map_err(|_| format!("pid {pid} out of range"))?;
    let signal = match signal {
        Signal::Kill => S::SIGKILL,
        Signal::Stop => S::SIGSTOP,
        Signal::Cont => S::SIGCONT,
        Signal::Term => S::SIGTERM,
    };
    kill(nix::unistd::Pid::from_raw(pid), signal).map_err(|e| format!("{signal} to pid {pid}: {e}"))
}

#[cfg(not(unix))]
fn send(_pid: u32, _signal: Signal) -> std::result::Result<(), String> {
    Err("signals need a Unix system".to_owned())
}

/// SIGTERM, then up to [`STOP_GRACE`] for the process to clean up, then SIGKILL.
fn stop_child(child: &mut Child) {
    if send(child.id(), Signal::Term).is_ok() {
        let deadline = std::time::Instant::now() + STOP_GRACE;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(POLL_INTERVAL); // poll interval
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}
