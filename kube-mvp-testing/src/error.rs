//! The one error type of the fixture: every failure says what was attempted and why it failed.

use std::path::PathBuf;

/// Why a fixture operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No `apiserver-fake` binary was found (see [`crate::binary::find`] for where it looks).
    #[error(
        "no apiserver-fake binary: set {env} to its path, put it on PATH, or build it in this cargo workspace \
         (`cargo build -p apiserver-fake`)",
        env = crate::binary::BINARY_ENV
    )]
    BinaryNotFound,
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was attempted (with the path).
        what: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The builder describes a cluster that cannot be started (found before anything starts).
    #[error("invalid cluster: {0}")]
    InvalidCluster(String),
    /// The `cluster` command exited before the cluster was up: its exit status and the end of its log
    /// (the binary's own one-line explanation, for a configuration it refuses).
    #[error("apiserver-fake cluster exited ({status}) before the cluster was up: {log}")]
    ClusterExited {
        /// How it exited.
        status: String,
        /// The last lines of its output.
        log: String,
    },
    /// `cluster.json` is not what the binary writes.
    #[error("{path}: not a cluster manifest: {message}")]
    Manifest {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// `report.json` is not what `apiserver-fake upgrade` writes.
    #[error("{path}: not an upgrade report: {message}")]
    Report {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// No server of this name in the cluster, or it has no process of its own to signal.
    #[error("no server named {0:?} in the cluster")]
    UnknownServer(String),
    /// A fault that this cluster's mode cannot inject.
    #[error("cannot {action} server {server}: {why}")]
    Fault {
        /// What was attempted (`kill`, `pause`, `resume`).
        action: &'static str,
        /// The server.
        server: String,
        /// Why it is impossible.
        why: String,
    },
    /// A kubeconfig could not be read or a kube-rs client could not be built from it.
    #[error("kube client for {what}: {message}")]
    KubeClient {
        /// Which server (or the load balancer).
        what: String,
        /// kube-rs's error.
        message: String,
    },
    /// A deadline passed while waiting for a condition.
    #[error("timed out after {seconds}s waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// The deadline in whole seconds.
        seconds: u64,
    },
    /// A probe did not succeed often enough in a row before the deadline ([`crate::until_steady`]).
    #[error("not steady within {seconds}s: {what}; failures: {failures}")]
    NotSteady {
        /// What was probed.
        what: String,
        /// The deadline in whole seconds.
        seconds: u64,
        /// The failures seen, in order (their `Debug` form).
        failures: String,
    },
    /// kubectl could not be run.
    #[error("kubectl: {0}")]
    Kubectl(String),
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }
}

/// The fixture's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
