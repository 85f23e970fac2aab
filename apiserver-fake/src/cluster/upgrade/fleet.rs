//! The servers an upgrade run rolls, however they run: in this process on the shared in-memory store
//! (`--run in-process`, the default), or each its own OS process of this binary on etcd (`--run
//! processes --store etcd`), stopped with SIGTERM (SIGKILL with `--crash`) and started again at the new
//! version as a new process, as kubelet restarts a static pod with a new image; or each its own Docker
//! container (`--run containers --store etcd`), the same through `docker stop` and `docker kill`.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;

use crate::cluster::process::{EtcdBackend, ProcessCluster};
use crate::cluster::{Cluster, MemberSpec, launch_cluster};

/// A run's servers.
#[derive(Debug)]
pub(crate) enum Fleet {
    /// In this process.
    InProcess(Box<Cluster>),
    /// Separate processes on etcd.
    Processes(Box<ProcessCluster>),
}

impl Fleet {
    /// Starts `members` in this process, each ready and every proxy knowing its peers.
    pub(crate) async fn in_process(members: Vec<MemberSpec>) -> anyhow::Result<Self> {
        let cluster = launch_cluster(None, members, 0).await?;
        cluster
            .wait_until_peers_know_each_other(Duration::from_secs(10))
            .await?;
        Ok(Self::InProcess(Box::new(cluster)))
    }

    /// Starts `members` as processes of this binary on `backend` under `prefix`, each ready (a ready
    /// server's peers have fetched its discovery).
    pub(crate) async fn processes(
        members: Vec<MemberSpec>,
        backend: EtcdBackend,
        prefix: &str,
    ) -> anyhow::Result<Self> {
        let binary = std::env::current_exe().context("cannot find this binary to start its servers")?;
        let cluster = ProcessCluster::start(&binary, None, members, 0, backend, prefix).await?;
        Ok(Self::Processes(Box::new(cluster)))
    }

    /// Starts `members` as Docker containers of this binary on etcd in a container, under `prefix`,
    /// each ready; `mounts` are absolute paths the servers' flags name besides the cluster's
    /// directory. Stopped with `docker stop` (`docker kill` with `--crash`), started again as new
    /// containers.
    pub(crate) async fn containers(
        members: Vec<MemberSpec>,
        prefix: &str,
        mounts: Vec<std::path::PathBuf>,
    ) -> anyhow::Result<Self> {
        let binary = std::env::current_exe().context("cannot find this binary to start its servers")?;
        let cluster = ProcessCluster::start_in_containers(
            &binary,
            None,
            members,
            0,
            prefix,
            crate::cluster::load_balancer::LoadBalancerKind::None,
            mounts,
        )
        .await?;
        Ok(Self::Processes(Box::new(cluster)))
    }

    /// Where the cluster's files are.
    pub(crate) fn dir(&self) -> &std::path::Path {
        match self {
            Self::InProcess(c) => &c.dir,
            Self::Processes(c) => c.dir(),
        }
    }

    /// The cluster's PKI.
    pub(crate) fn pki(&self) -> &certs::Pki {
        match self {
            Self::InProcess(c) => c.pki(),
            Self::Processes(c) => c.pki(),
        }
    }

    /// Every server's name and address, in order.
    pub(crate) fn backends(&self) -> anyhow::Result<Vec<(String, SocketAddr)>> {
        match self {
            Self::InProcess(c) => Ok(c
                .servers
                .iter()
                .map(|(member, server)| (member.name.clone(), server.local_addr()))
                .collect()),
            Self::Processes(c) => c
                .names()
                .into_iter()
                .map(|name| Ok((name.to_owned(), address(&c.url(name)?)?)))
                .collect(),
        }
    }

    /// Stops server `index` (`name`) gracefully, or kills it with `crash`; returns its port.
    pub(crate) async fn stop(&mut self, index: usize, name: &str, crash: bool) -> anyhow::Result<u16> {
        match self {
            Self::InProcess(c) => c.stop_member(index, crash).await,
            Self::Processes(c) => {
                let port = address(&c.url(name)?)?.port();
                if crash {
                    c.kill(name).await?;
                } else {
                    c.stop(name).await?;
                }
                Ok(port)
            }
        }
    }

    /// Starts server `index` again as `member` (its new version), on `port` when it can, and waits
    /// until it is ready; returns its address.
    pub(crate) async fn start_again(
        &mut self,
        index: usize,
        member: MemberSpec,
        port: u16,
    ) -> anyhow::Result<SocketAddr> {
        match self {
            Self::InProcess(c) => {
                let name = member.name.clone();
                if let Err(err) = c.put_member(index, member.clone(), port).await {
                    // Its old port (from the ephemeral range) may have been taken by an outgoing
                    // connection meanwhile: it comes back on a new one, and the balancer learns it.
                    tracing::info!(error = %err, "server {name} cannot come back on port {port}; trying a new one");
                    c.put_member(index, member, 0).await?;
                }
                Ok(c.servers[index].1.local_addr())
            }
            Self::Processes(c) => {
                let name = member.name.clone();
                c.restart_as(member).await?;
                address(&c.url(&name)?)
            }
        }
    }

    /// Stops every server (and the private etcd).
    pub(crate) async fn shutdown(self) {
        match self {
            Self::InProcess(c) => (*c).shutdown().await,
            Self::Processes(c) => (*c).shutdown().await,
        }
    }
}

/// `ip:port` of an `https://ip:port` URL.
fn address(url: &str) -> anyhow::Result<SocketAddr> {
    url.trim_start_matches("https://")
        .parse()
        .with_context(|| format!("not an address: {url}"))
}
