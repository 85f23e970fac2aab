//! End-to-end harness for the Mixed Version Proxy: clusters of fake kube-apiservers on loopback, driven
//! over real TLS by real clients, with answers captured as snapshot-friendly [`Exchange`]s.
//!
//! The fixture is public so other projects can test their own Kubernetes clients against a
//! mixed-version control plane: start servers of different versions, disable API groups on some, and see
//! what a client sees when its request lands on a server that does not serve the resource.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use e2e::{ClusterBuilder, eventually};
//! use serde_json::json;
//!
//! # async fn demo() -> e2e::Result<()> {
//! // Server a is 1.36 with every default API; b emulates an older, partially upgraded server that
//! // does not serve batch/v1.
//! let cluster = ClusterBuilder::new()
//!     .server("a", |s| s.version("1.36"))
//!     .server("b", |s| s.version("1.36").runtime_config("batch/v1=false"))
//!     .start()
//!     .await?;
//!
//! let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "hello"},
//!                  "spec": {"template": {"spec": {"restartPolicy": "Never",
//!                           "containers": [{"name": "c", "image": "busybox"}]}}}});
//! let b = cluster.client("b")?;
//! // The first request after startup may race the peer discovery sync; poll instead of sleeping.
//! let created = eventually("b proxies batch/v1", Duration::from_secs(10), || async {
//!     let reply = b.post_json("/apis/batch/v1/namespaces/default/jobs", &job).await.ok()?;
//!     (reply.code() == 201).then_some(reply)
//! })
//! .await?;
//! // Snapshot what the client saw (status line, meaningful headers, redacted body), e.g. with
//! // insta::assert_yaml_snapshot!(created).
//! println!("{}", serde_json::to_string_pretty(&created).unwrap_or_default());
//!
//! // A peer that cannot answer: b still routes to a, which is gone.
//! let mut cluster = cluster;
//! cluster.kill("a").await?;
//! let reply = cluster.client("b")?.get("/apis/batch/v1/namespaces/default/jobs").await?;
//! assert_eq!(reply.code(), 503);
//! cluster.shutdown().await; // or just drop it: teardown never leaks tasks, ports or files
//! # Ok(()) }
//! ```
//!
//! Modules: [`cluster`] (the fixture), [`client`] (HTTPS client), [`exchange`] (snapshot type and
//! redactions), [`kubectl`] (the real kubectl, optional; from
//! [`kube_mvp_testing`]), [`python`] (the official Python client, optional), [`eventually()`] (polling
//! with deadlines, from [`kube_mvp_testing`]).
#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub mod client;
pub mod cluster;
#[cfg(feature = "containers")]
pub mod containers;
pub mod error;
pub mod exchange;
pub mod python;

pub use client::{ClientIdentity, ExchangeRequest, HttpsClient};
pub use cluster::{
    ADMIN_TOKEN, ClusterBuilder, ControllerManagerOptions, JANE_TOKEN, LoadBalancerKind, MVP_GATE, PeerProxy,
    STORE_ENV, ServerBuilder, StoreBackend, TestCluster,
};
pub use error::{FixtureError, Result};
pub use exchange::{Exchange, ExchangeBody, redact_json, redact_text};
// The shared harness (one kubectl runner, one `eventually`) is the published fixture's.
pub use kube_mvp_testing::{Kubectl, KubectlOutput, eventually, kubectl};
pub use mvp_core::PeerResolutionMode;
pub use python::PythonClient;

/// The README's example, compiled as a doctest so it cannot go stale.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
