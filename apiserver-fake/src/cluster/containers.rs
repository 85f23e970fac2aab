//! Servers in Docker containers (`run: containers`, `upgrade --run containers`): each server its own
//! container of this binary on a network of the cluster's own, on etcd in a container too, as the
//! e2e containers suite runs them (`e2e::containers`), through the `docker` command line.
//!
//! No registry: [`build_images`] builds `kube-mvp/apiserver-fake:dev` from this binary and
//! `kube-mvp/etcd:dev` from the `etcd` on `PATH`, each `FROM scratch` with the shared libraries `ldd`
//! lists (the same images the containers suite builds).
//!
//! How the host reaches them: every server's port 6443 is published on the server's own loopback
//! address and port (`-p 127.0.0.N:PORT:6443`), so the URLs, kubeconfigs, certificates and the load
//! balancer are those of a process cluster. Inside the network a server binds `0.0.0.0:6443` and
//! advertises its container address to its peers (which verify `kubernetes.default.svc`, in every
//! server certificate). The cluster's directory (and any other path a server's flags name, such as
//! `upgrade`'s audit logs) is mounted at the same path, so flags name the same files inside and out.
//!
//! Lifetime: a server runs as `docker run -i --rm …` whose standard input is a pipe from this
//! process (`--exit-when-stdin-closes`), so it stops when this process dies, even by SIGKILL; `docker
//! stop` stops one gracefully (SIGTERM), `docker kill` crashes it, `docker pause` stalls it. Dropping
//! [`Containers`] removes every container of the cluster (by label) and its network.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use tokio::process::Command;

/// The fake's image (the containers suite's name).
pub const FAKE_IMAGE: &str = "kube-mvp/apiserver-fake:dev";
/// The etcd image (the containers suite's name).
pub const ETCD_IMAGE: &str = "kube-mvp/etcd:dev";
/// The port a server listens on inside its container (kube-apiserver's default).
pub const SECURE_PORT: u16 = 6443;
/// The label every container of a cluster carries (its value: the network's name).
const LABEL: &str = "kube-mvp.cluster";

/// Runs `docker args…` and fails with its standard error when it fails.
async fn docker(args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .context("failed to run docker (is the Docker engine installed?)")?;
    anyhow::ensure!(
        output.status.success(),
        "docker {}: {}",
        args.first().copied().unwrap_or_default(),
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// Whether a Docker engine answers `docker info`.
pub fn docker_available() -> bool {
    std::process::Command::new("docker")
        .arg("info")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The shared libraries `ldd` lists for `binary` (the dynamic loader included): what a `FROM scratch`
/// image of it must hold (the e2e containers suite builds its images with it too).
pub fn shared_libraries(binary: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let output = std::process::Command::new("ldd")
        .arg(binary)
        .output()
        .context("failed to run ldd")?;
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let path = match line.split_once("=>") {
                Some((_, rest)) => rest.split_whitespace().next()?,
                None => line.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect())
}

/// Builds image `tag`: `binary` as `/entrypoint` and its libraries, `FROM scratch`.
async fn build_image(tag: &str, binary: &Path, entrypoint: &str) -> anyhow::Result<()> {
    let context = tempfile::Builder::new()
        .prefix("kube-mvp-image-")
        .tempdir()
        .context("failed to create a build context")?;
    let rootfs = context.path().join("rootfs");
    let place = |source: &Path, target: &Path| -> anyhow::Result<()> {
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        // The file itself, not a symlink to it (the loader's /lib64 path is one): a hard link
        // when it can (a debug binary is large), else a copy.
        let source = std::fs::canonicalize(source).with_context(|| format!("{}", source.display()))?;
        if std::fs::hard_link(&source, target).is_err() {
            std::fs::copy(&source, target).with_context(|| format!("failed to copy {}", source.display()))?;
        }
        Ok(())
    };
    place(binary, &rootfs.join(entrypoint))?;
    for library in shared_libraries(binary)? {
        let target = rootfs.join(library.strip_prefix("/").unwrap_or(&library));
        place(&library, &target)?;
    }
    std::fs::write(
        context.path().join("Dockerfile"),
        format!("FROM scratch\nCOPY rootfs/ /\nENTRYPOINT [\"/{entrypoint}\"]\n"),
    )?;
    let context_dir = context.path().display().to_string();
    docker(&["build", "--quiet", "--tag", tag, &context_dir])
        .await
        .with_context(|| format!("failed to build {tag}"))?;
    Ok(())
}

/// Builds [`FAKE_IMAGE`] from `fake_binary` (which must have the etcd feature) and [`ETCD_IMAGE`]
/// from the `etcd` on `PATH`, once per process.
pub async fn build_images(fake_binary: &Path) -> anyhow::Result<()> {
    static BUILT: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    BUILT
        .get_or_try_init(|| async {
            let etcd =
                which("etcd").context("no etcd binary on PATH (Debian: apt-get install -y etcd-server)")?;
            build_image(FAKE_IMAGE, fake_binary, "apiserver-fake").await?;
            build_image(ETCD_IMAGE, &etcd, "etcd").await
        })
        .await
        .map(|_| ())
}

fn which(binary: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(binary))
        .find(|candidate| candidate.is_file())
}

/// The Docker side of a container cluster: its network, its etcd container, the paths mounted into
/// every server (see the module docs).
#[derive(Debug)]
pub struct Containers {
    network: String,
    mounts: Vec<PathBuf>,
    etcd_url: String,
}

impl Containers {
    /// Builds the images (once per process), creates a network named after `dir` and starts etcd on
    /// it; `mounts` are the absolute paths every server container gets at the same path.
    pub async fn start(binary: &Path, dir: &Path, mounts: Vec<PathBuf>) -> anyhow::Result<Self> {
        anyhow::ensure!(
            docker_available(),
            "run: containers needs a Docker engine, and none answers `docker info`"
        );
        build_images(binary).await?;
        let suffix: String = uuid::Uuid::new_v4()
            .simple()
            .to_string()
            .chars()
            .take(10)
            .collect();
        let network = format!("kube-mvp-{suffix}");
        docker(&[
            "network",
            "create",
            "--label",
            &format!("{LABEL}={network}"),
            &network,
        ])
        .await?;
        let containers = Self {
            etcd_url: format!("http://{network}-etcd:2379"),
            network,
            mounts: std::iter::once(dir.to_owned()).chain(mounts).collect(),
        };
        containers.start_etcd().await?;
        Ok(containers)
    }

    async fn start_etcd(&self) -> anyhow::Result<()> {
        let name = format!("{}-etcd", self.network);
        let host_port = crate::cluster::etcd_process::free_port(std::net::Ipv4Addr::LOCALHOST)?;
        docker(&[
            "run",
            "--detach",
            "--rm",
            "--name",
            &name,
            "--label",
            &format!("{LABEL}={}", self.network),
            "--network",
            &self.network,
            "--publish",
            &format!("127.0.0.1:{host_port}:2379"),
            ETCD_IMAGE,
            "--name=default",
            "--data-dir=/data",
            "--listen-client-urls=http://0.0.0.0:2379",
            &format!("--advertise-client-urls={}", self.etcd_url),
            "--listen-peer-urls=http://127.0.0.1:2380",
        ])
        .await
        .context("failed to start etcd's container")?;
        let addr = SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, host_port));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !tokio::task::spawn_blocking(move || crate::cluster::etcd_process::healthy(addr))
            .await
            .unwrap_or(false)
        {
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "etcd's container did not become healthy within 20 s (docker logs {name})"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// `--etcd-servers` of the servers: etcd's container by name on the network.
    pub fn etcd_url(&self) -> &str {
        &self.etcd_url
    }

    /// The container name of server `name`.
    pub fn container_name(&self, name: &str) -> String {
        format!("{}-{name}", self.network)
    }

    /// `docker run -i --rm` of server `name` with kube-apiserver's `args` (their `--bind-address`
    /// and `--secure-port` replaced by the container's), its port published on `publish`.
    pub fn run_command(&self, name: &str, publish: SocketAddr, args: &[String]) -> Command {
        let mut command = Command::new("docker");
        command
            .args(["run", "--interactive", "--rm", "--name"])
            .arg(self.container_name(name))
            .args(["--hostname", name, "--network", &self.network, "--label"])
            .arg(format!("{LABEL}={}", self.network))
            .arg("--publish")
            .arg(format!("{}:{}:{SECURE_PORT}", publish.ip(), publish.port()));
        for path in &self.mounts {
            command.arg("--volume").arg(format!("{0}:{0}", path.display()));
        }
        command.arg(FAKE_IMAGE).arg("--exit-when-stdin-closes");
        for arg in args {
            if arg.starts_with("--bind-address=") || arg.starts_with("--secure-port=") {
                continue;
            }
            command.arg(arg);
        }
        command
            .arg("--bind-address=0.0.0.0")
            .arg(format!("--secure-port={SECURE_PORT}"));
        command
    }

    /// `docker kill` (SIGKILL: nothing the server published is cleaned up).
    pub async fn kill(&self, name: &str) -> anyhow::Result<()> {
        docker(&["kill", &self.container_name(name)]).await.map(drop)
    }

    /// `docker stop` (SIGTERM, then SIGKILL after 10 s).
    pub async fn stop(&self, name: &str) -> anyhow::Result<()> {
        docker(&["stop", "--time", "10", &self.container_name(name)])
            .await
            .map(drop)
    }

    /// `docker pause`: every process of the server frozen, its address and sockets kept.
    pub async fn pause(&self, name: &str) -> anyhow::Result<()> {
        docker(&["pause", &self.container_name(name)]).await.map(drop)
    }

    /// `docker unpause`.
    pub async fn unpause(&self, name: &str) -> anyhow::Result<()> {
        docker(&["unpause", &self.container_name(name)]).await.map(drop)
    }
}

impl Drop for Containers {
    fn drop(&mut self) {
        // Blocking, and best effort: whatever is left of the cluster goes, then its network.
        let filter = format!("label={LABEL}={}", self.network);
        if let Ok(output) = std::process::Command::new("docker")
            .args(["ps", "--all", "--quiet", "--filter", &filter])
            .output()
        {
            let ids: Vec<String> = String::from_utf8_lossy(&output.stdout)
                .split_whitespace()
                .map(str::to_owned)
                .collect();
            if !ids.is_empty() {
                let _ = std::process::Command::new("docker")
                    .args(["rm", "--force"])
                    .args(&ids)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
        let _ = std::process::Command::new("docker")
            .args(["network", "rm", &self.network])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
