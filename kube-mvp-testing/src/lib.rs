//! Test fixture for Kubernetes clients and controllers: a cluster of fake kube-apiservers of mixed
//! versions (a control plane in the middle of an upgrade, with the Mixed Version Proxy of KEP-4020),
//! behind a load balancer, with a kube-rs [`kube::Client`] and `kubectl` per server, faults, and
//! [`eventually()`] to wait for what a client can see instead of sleeping ([`until_steady()`] to wait
//! for a run of successes after a fault).
//!
//! ```no_run
//! use kube::api::{Api, ListParams};
//! use k8s_openapi::api::batch::v1::Job;
//! use kube_mvp_testing::ClusterBuilder;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let cluster = ClusterBuilder::new()
//!     .server("old", |s| s.version("1.36").runtime_config("batch/v1=false"))
//!     .server("new", |s| s.version("1.36"))
//!     .start()
//!     .await?;
//! // "old" does not serve batch/v1: its Mixed Version Proxy forwards the request to "new".
//! let jobs: Api<Job> = Api::default_namespaced(cluster.client("old").await?);
//! assert!(jobs.list(&ListParams::default()).await?.items.is_empty());
//! # Ok(()) }
//! ```
//!
//! The cluster is the `apiserver-fake` binary's `cluster --config FILE`, the file rendered from the
//! [`ClusterBuilder`]; so every mode the binary has is a builder option: in-process servers or one OS
//! process each ([`Run`]), the in-memory store or etcd ([`Store`]), Docker containers, the embedded or
//! HAProxy load balancer ([`LoadBalancer`]), the controller manager. The binary is found as
//! [`binary::find`] says (`$KUBE_MVP_APISERVER_FAKE`, `PATH`, the cargo target directory); start-up
//! returns once `cluster.json` is written, when every server is ready and every proxy knows its peers.
//! Faults: [`Cluster::kill`], [`Cluster::pause`] and [`Cluster::resume`] on process servers.
//! [`ClusterProcess`] is that `cluster` command with the caller's own arguments, for tests of the
//! binary's command line. [`UpgradeReport`] reads what the binary's upgrade simulator (`apiserver-fake upgrade --out DIR`) found.
#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub mod binary;
pub mod builder;
pub mod cluster;
pub mod error;
pub mod eventually;
pub mod kubectl;
pub mod process;
pub mod upgrade_report;

pub use builder::{ClusterBuilder, LoadBalancer, Run, ServerBuilder, Store};
pub use cluster::{Balancer, Cluster, Server};
pub use error::{Error, Result};
pub use eventually::{eventually, eventually_blocking, until_steady};
pub use kubectl::{Kubectl, KubectlOutput};
pub use process::ClusterProcess;
pub use upgrade_report::UpgradeReport;
