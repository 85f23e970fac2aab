//! Clusters of fakes in Docker containers ([testcontainers]), for what a loopback cluster cannot
//! show: servers with their own IP address and hostname on a network of their own, and the faults of
//! real hosts. `docker kill` (a crash), `docker pause` (a stalled host), `docker network disconnect`
//! (a partitioned host) and a rolling restart onto a newer version.
//!
//! No image is pulled from a registry: [`build_images`] makes both images locally, `FROM scratch`,
//! from the workspace's own `apiserver-fake` binary (built with the `etcd` feature) and Debian's
//! `etcd`, each with the few shared libraries `ldd` lists. [`ApiserverFake`] and [`Etcd`] are
//! `testcontainers::Image`s in the style of testcontainers-modules' K3s and Kwok modules: version,
//! runtime-config and feature gates as builder methods, ready when the server says it listens.
//!
//! [`ContainerCluster`] starts etcd and the servers on a new user-defined network. Each server's
//! serving certificate names its hostname, `kubernetes.default.svc` (which peers verify) and
//! `127.0.0.1` (the host reaches each server through a published port). Dropping the cluster removes
//! its containers and network.

use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use testcontainers::core::{ContainerPort, IntoContainerPort, Mount, WaitFor};
use testcontainers::runners::{AsyncBuilder, AsyncRunner};
use testcontainers::{ContainerAsync, GenericBuildableImage, Image, ImageExt};

use crate::client::{ClientIdentity, HttpsClient};
use crate::cluster::ServerBuilder;
use crate::error::{FixtureError, Result};

/// The fake's image (built by [`build_images`]).
pub const FAKE_IMAGE: &str = "kube-mvp/apiserver-fake";
/// The etcd image (built by [`build_images`]).
pub const ETCD_IMAGE: &str = "kube-mvp/etcd";
/// The tag of both images.
pub const TAG: &str = "dev";
/// The port every fake listens on inside its container (kube-apiserver's default).
pub const SECURE_PORT: u16 = 6443;
/// Where a server container finds the cluster's PKI (mounted read-only).
const PKI_DIR: &str = "/pki";

fn docker_error(err: impl std::fmt::Display) -> FixtureError {
    FixtureError::Store(format!("docker: {err}"))
}

/// A `FROM scratch` image holding `binary` as `/entrypoint` and its shared libraries at their paths.
fn scratch_image(name: &str, binary: &Path, entrypoint: &str) -> Result<GenericBuildableImage> {
    let mut image = GenericBuildableImage::new(name, TAG)
        .with_dockerfile_string(format!(
            "FROM scratch\nCOPY rootfs/ /\nENTRYPOINT [\"/{entrypoint}\"]\n"
        ))
        .with_file(binary, format!("rootfs/{entrypoint}"));
    let libraries = apiserver_fake::cluster::containers::shared_libraries(binary)
        .map_err(|e| docker_error(format!("{e:#}")))?;
    for library in libraries {
        let target = format!("rootfs{}", library.display());
        image = image.with_file(library, target);
    }
    Ok(image)
}

/// Builds [`FAKE_IMAGE`] from `fake_binary` and [`ETCD_IMAGE`] from the `etcd` on `PATH`, once per
/// process (every cluster of a test run uses the same binary).
pub async fn build_images(fake_binary: &Path) -> Result<()> {
    static BUILT: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    BUILT
        .get_or_try_init(|| build_images_now(fake_binary))
        .await
        .map(|_| ())
}

async fn build_images_now(fake_binary: &Path) -> Result<()> {
    let etcd = which("etcd").ok_or_else(|| FixtureError::Store("no etcd binary on PATH".to_owned()))?;
    for (name, binary, entrypoint) in [
        (FAKE_IMAGE, fake_binary, "apiserver-fake"),
        (ETCD_IMAGE, etcd.as_path(), "etcd"),
    ] {
        // The built image's handle is not needed: containers name the image.
        let _built = scratch_image(name, binary, entrypoint)?
            .build_image()
            .await
            .map_err(docker_error)?;
    }
    Ok(())
}

fn which(binary: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .map(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(binary))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .find(|candidate| candidate.is_file())
}

/// The `apiserver-fake` binary the shared fixture finds ([`kube_mvp_testing::binary::find`]: in this
/// workspace `target/debug/apiserver-fake`), when it was built with the `etcd` feature.
pub fn fake_binary() -> std::result::Result<PathBuf, String> {
    let binary = kube_mvp_testing::binary::find().map_err(|e| e.to_string())?;
    let version = std::process::Command::new(&binary)
        .arg("--version")
        .output()
        .map_err(|e| {
            format!(
                "{}: {e} (cargo build -p apiserver-fake --features etcd)",
                binary.display()
            )
        })?;
    let version = String::from_utf8_lossy(&version.stdout);
    if !version.contains("etcd") {
        return Err(format!(
            "{} was built without the etcd feature (cargo build -p apiserver-fake --features etcd)",
            binary.display()
        ));
    }
    Ok(binary)
}

/// Whether a Docker engine answers.
pub fn docker_available() -> bool {
    std::process::Command::new("docker")
        .arg("info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The fake as a container image: kube-apiserver's flags as its command.
#[derive(Debug, Clone)]
pub struct ApiserverFake {
    args: Vec<String>,
    ports: [ContainerPort; 1],
}

impl ApiserverFake {
    /// A fake started with `args` (kube-apiserver's flags).
    pub fn new(args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            args: args.into_iter().map(Into::into).collect(),
            ports: [SECURE_PORT.tcp()],
        }
    }

    /// Serve Kubernetes `version` (`--kubernetes-version`).
    pub fn with_version(self, version: &str) -> Self {
        self.with_flag(&format!("--kubernetes-version={version}"))
    }

    /// `--runtime-config` (e.g. `batch/v1=false`).
    pub fn with_runtime_config(self, entries: &str) -> Self {
        self.with_flag(&format!("--runtime-config={entries}"))
    }

    /// `--feature-gates` (e.g. `UnknownVersionInteroperabilityProxy=true`).
    pub fn with_feature_gates(self, gates: &str) -> Self {
        self.with_flag(&format!("--feature-gates={gates}"))
    }

    /// Any other flag, replacing an earlier one of the same name.
    pub fn with_flag(mut self, flag: &str) -> Self {
        let name = flag.split('=').next().unwrap_or_default();
        self.args.retain(|a| a.split('=').next() != Some(name));
        self.args.push(flag.to_owned());
        self
    }
}

impl Image for ApiserverFake {
    fn name(&self) -> &str {
        FAKE_IMAGE
    }

    fn tag(&self) -> &str {
        TAG
    }

    fn ready_conditions(&self) -> Vec<WaitFor> {
        vec![WaitFor::message_on_stderr("listening on")]
    }

    fn cmd(&self) -> impl IntoIterator<Item = impl Into<Cow<'_, str>>> {
        self.args.iter().map(String::as_str)
    }

    fn expose_ports(&self) -> &[ContainerPort] {
        &self.ports
    }
}

/// A single-member etcd as a container image (client port 2379).
#[derive(Debug, Clone)]
pub struct Etcd {
    args: Vec<String>,
    ports: [ContainerPort; 1],
}

impl Etcd {
    /// An etcd advertising `http://{hostname}:2379` to its clients.
    pub fn new(hostname: &str) -> Self {
        let args = [
            "--name=default",
            "--data-dir=/data",
            "--listen-client-urls=http://0.0.0.0:2379",
            "--listen-peer-urls=http://127.0.0.1:2380",
        ]
        .into_iter()
        .map(str::to_owned)
        .chain([format!("--advertise-client-urls=http://{hostname}:2379")])
        .collect();
        Self {
            args,
            ports: [2379.tcp()],
        }
    }
}

impl Image for Etcd {
    fn name(&self) -> &str {
        ETCD_IMAGE
    }

    fn tag(&self) -> &str {
        TAG
    }

    fn ready_conditions(&self) -> Vec<WaitFor> {
        vec![WaitFor::message_on_stderr("ready to serve client requests")]
    }

    fn cmd(&self) -> impl IntoIterator<Item = impl Into<Cow<'_, str>>> {
        self.args.iter().map(String::as_str)
    }

    fn expose_ports(&self) -> &[ContainerPort] {
        &self.ports
    }
}

/// One server container of a [`ContainerCluster`].
struct Member {
    builder: ServerBuilder,
    container: Option<ContainerAsync<ApiserverFake>>,
    port: u16,
}

/// A cluster of fake containers on etcd, on a network of its own (see the module docs).
pub struct ContainerCluster {
    network: String,
    members: Vec<Member>,
    _etcd: ContainerAsync<Etcd>,
    docker: testcontainers::bollard::Docker,
    pki: certs::Pki,
    paths: certs::PkiPaths,
    ready_timeout: Duration,
    // Last: removed after the containers that mount it.
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for ContainerCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerCluster")
            .field("network", &self.network)
            .finish_non_exhaustive()
    }
}

/// Describes a [`ContainerCluster`]: servers as [`ServerBuilder`]s (their flags are used, with the
/// container's own address and port).
#[derive(Debug, Default)]
pub struct ContainerClusterBuilder {
    servers: Vec<ServerBuilder>,
}

impl ContainerClusterBuilder {
    /// An empty cluster.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds server `name` at Kubernetes `version`, configured by `configure`.
    pub fn server(
        mut self,
        name: &str,
        version: &str,
        configure: impl FnOnce(ServerBuilder) -> ServerBuilder,
    ) -> Self {
        self.servers
            .push(configure(ServerBuilder::named(name).version(version)));
        self
    }

    /// Builds the images from `fake_binary`, writes the PKI, starts etcd and every server on a new
    /// network and waits until each server's `/readyz` is ok.
    pub async fn start(self, fake_binary: &Path) -> Result<ContainerCluster> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        build_images(fake_binary).await?;
        let dir = tempfile::Builder::new()
            .prefix("kube-mvp-containers-")
            .tempdir()
            .map_err(|source| FixtureError::Io {
                path: std::env::temp_dir(),
                source,
            })?;
        let spec = certs::PkiSpec::new(self.servers.iter().map(|builder| {
            certs::ServerSpec::new(builder.name(), [IpAddr::V4(Ipv4Addr::LOCALHOST)]).with_dns(builder.name())
        }));
        let pki = certs::Pki::generate(&spec)?;
        let paths = pki.write_to(dir.path())?;
        let tokens = dir.path().join("tokens.csv");
        std::fs::write(&tokens, crate::cluster::TOKENS_CSV).map_err(|source| FixtureError::Io {
            path: tokens.clone(),
            source,
        })?;
        let suffix = dir
            .path()
            .file_name()
            .map(|n| {
                n.to_string_lossy()
                    .trim_start_matches("kube-mvp-containers-")
                    .to_lowercase()
            })
            .unwrap_or_default();
        let network = format!("kube-mvp-{suffix}");
        let etcd_name = format!("{network}-etcd");
        let etcd = Etcd::new(&etcd_name)
            .with_network(&network)
            .with_container_name(&etcd_name)
            .start()
            .await
            .map_err(docker_error)?;
        let docker = testcontainers::bollard::Docker::connect_with_defaults().map_err(docker_error)?;
        let mut cluster = ContainerCluster {
            network,
            members: Vec::new(),
            _etcd: etcd,
            docker,
            pki,
            paths,
            ready_timeout: Duration::from_secs(30),
            dir,
        };
        for builder in self.servers {
            cluster.members.push(Member {
                builder,
                container: None,
                port: 0,
            });
        }
        for index in 0..cluster.members.len() {
            cluster.run(index).await?;
        }
        for index in 0..cluster.members.len() {
            cluster.wait_ready(index).await?;
        }
        Ok(cluster)
    }
}

impl ContainerCluster {
    fn index(&self, name: &str) -> Result<usize> {
        self.members
            .iter()
            .position(|m| m.builder.name() == name)
            .ok_or_else(|| FixtureError::UnknownServer(name.to_owned()))
    }

    fn container_name(&self, name: &str) -> String {
        format!("{}-{name}", self.network)
    }

    /// The image of member `index`: its builder's flags with the container's paths, address and
    /// port, etcd, and the peer CA when its gate is on.
    fn image(&self, index: usize) -> Result<ApiserverFake> {
        let paths = certs::PkiPaths::new(Path::new(PKI_DIR));
        let tokens = Path::new(PKI_DIR).join("tokens.csv");
        let args = self.members[index]
            .builder
            .full_command_line(&paths, Ipv4Addr::UNSPECIFIED, &tokens)?;
        Ok(ApiserverFake::new(args)
            .with_flag(&format!("--secure-port={SECURE_PORT}"))
            .with_flag(&format!("--etcd-servers=http://{}-etcd:2379", self.network)))
    }

    async fn run(&mut self, index: usize) -> Result<()> {
        let name = self.members[index].builder.name().to_owned();
        let container = self
            .image(index)?
            .with_network(&self.network)
            .with_container_name(self.container_name(&name))
            .with_hostname(&name)
            .with_mount(
                Mount::bind_mount(self.dir.path().display().to_string(), PKI_DIR)
                    .with_access_mode(testcontainers::core::AccessMode::ReadOnly),
            )
            .start()
            .await
            .map_err(|e| FixtureError::Start {
                server: name.clone(),
                message: e.to_string(),
            })?;
        let port = container
            .get_host_port_ipv4(SECURE_PORT.tcp())
            .await
            .map_err(docker_error)?;
        let member = &mut self.members[index];
        member.container = Some(container);
        member.port = port;
        self.pki
            .write_kubeconfig(&self.paths.kubeconfig(&name), &self.url_of(index), &name)?;
        Ok(())
    }

    async fn wait_ready(&self, index: usize) -> Result<()> {
        let name = self.members[index].builder.name();
        let client = self.client(name)?;
        let deadline = tokio::time::Instant::now() + self.ready_timeout;
        loop {
            if client.get("/readyz").await.is_ok_and(|r| r.code() == 200) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(FixtureError::NotReady {
                    server: name.to_owned(),
                    seconds: self.ready_timeout.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn url_of(&self, index: usize) -> String {
        format!("https://127.0.0.1:{}", self.members[index].port)
    }

    /// `https://127.0.0.1:PORT` of server `name`, as the host reaches it.
    pub fn url(&self, name: &str) -> Result<String> {
        Ok(self.url_of(self.index(name)?))
    }

    /// The admin kubeconfig of server `name` for the host.
    pub fn kubeconfig(&self, name: &str) -> Result<PathBuf> {
        self.index(name)?;
        Ok(self.paths.kubeconfig(name))
    }

    /// An HTTPS client of server `name` as `admin` (`system:masters`).
    pub fn client(&self, name: &str) -> Result<HttpsClient> {
        HttpsClient::new(
            name,
            &self.url(name)?,
            &self.paths.ca_cert,
            ClientIdentity::Certificate {
                cert: self.paths.admin_cert.clone(),
                key: self.paths.admin_key.clone(),
            },
        )
    }

    fn container(&self, name: &str) -> Result<&ContainerAsync<ApiserverFake>> {
        self.members[self.index(name)?]
            .container
            .as_ref()
            .ok_or_else(|| FixtureError::UnknownServer(name.to_owned()))
    }

    /// `docker kill`: the server's process dies (SIGKILL) and its address goes away.
    pub async fn kill(&mut self, name: &str) -> Result<()> {
        let id = self.container(name)?.id().to_owned();
        self.docker
            .kill_container(
                &id,
                None::<testcontainers::bollard::query_parameters::KillContainerOptions>,
            )
            .await
            .map_err(docker_error)
    }

    /// `docker pause`: every process of the server is frozen, its address and sockets stay.
    pub async fn pause(&self, name: &str) -> Result<()> {
        self.container(name)?.pause().await.map_err(docker_error)
    }

    /// `docker unpause`.
    pub async fn unpause(&self, name: &str) -> Result<()> {
        self.container(name)?.unpause().await.map_err(docker_error)
    }

    /// `docker network disconnect`: the server keeps running, cut off from its peers and etcd.
    pub async fn disconnect(&self, name: &str) -> Result<()> {
        let request = testcontainers::bollard::models::NetworkDisconnectRequest {
            container: self.container_name(name),
            force: Some(true),
        };
        self.docker
            .disconnect_network(&self.network, request)
            .await
            .map_err(docker_error)
    }

    /// `docker network connect`: undoes [`Self::disconnect`]. Docker publishes the server's port
    /// anew, so its URL and kubeconfig change.
    pub async fn reconnect(&mut self, name: &str) -> Result<()> {
        let request = testcontainers::bollard::models::NetworkConnectRequest {
            container: self.container_name(name),
            ..Default::default()
        };
        self.docker
            .connect_network(&self.network, request)
            .await
            .map_err(docker_error)?;
        let index = self.index(name)?;
        let port = self
            .container(name)?
            .get_host_port_ipv4(SECURE_PORT.tcp())
            .await
            .map_err(docker_error)?;
        self.members[index].port = port;
        self.pki
            .write_kubeconfig(&self.paths.kubeconfig(name), &self.url_of(index), name)?;
        Ok(())
    }

    /// `docker stop` (SIGTERM; the fake shuts down gracefully) and removes the container.
    pub async fn stop(&mut self, name: &str) -> Result<()> {
        let index = self.index(name)?;
        if let Some(container) = self.members[index].container.take() {
            container
                .stop_with_timeout(Some(10))
                .await
                .map_err(docker_error)?;
            container.rm().await.map_err(docker_error)?;
        }
        Ok(())
    }

    /// Starts server `name` again in a new container of the same name and hostname, at
    /// `version` (a rolling upgrade), and waits until it is ready; stops the old one first.
    pub async fn restart_at(&mut self, name: &str, version: &str) -> Result<()> {
        self.stop(name).await?;
        let index = self.index(name)?;
        self.members[index].builder = self.members[index].builder.clone().version(version);
        self.run(index).await?;
        self.wait_ready(index).await
    }
}
