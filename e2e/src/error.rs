//! Why a fixture operation failed.

use std::path::PathBuf;

/// Errors of the cluster fixture, its HTTP client and its kubectl runner.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// The cluster PKI could not be generated or written.
    #[error("cluster PKI")]
    Pki(#[from] certs::Error),
    /// A file of the fixture could not be created, read or written.
    #[error("{path}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// The flags of a server were rejected before it started (kube-apiserver's parse or validation
    /// message, which tests of flag validation snapshot).
    #[error("server {server}: {message}")]
    InvalidFlags {
        /// The server's name in the builder.
        server: String,
        /// The message of the rejection.
        message: String,
    },
    /// A server did not start (bind, certificates, ...).
    #[error("server {server} failed to start: {message}")]
    Start {
        /// The server's name in the builder.
        server: String,
        /// The startup error.
        message: String,
    },
    /// A server did not report ready in time.
    #[error("server {server} did not become ready within {seconds}s")]
    NotReady {
        /// The server's name in the builder.
        server: String,
        /// The readiness timeout.
        seconds: u64,
    },
    /// The controller manager did not start.
    #[error("controller manager: {0}")]
    ControllerManager(String),
    /// No server of that name is part of the cluster (or it has been stopped).
    #[error("no running server named {0:?}")]
    UnknownServer(String),
    /// Two servers were given the same name, or more servers than loopback addresses.
    #[error("invalid cluster layout: {0}")]
    Layout(String),
    /// TLS material for a client could not be loaded.
    #[error("client TLS: {0}")]
    Tls(String),
    /// An HTTP request could not be built or sent, or its body not read.
    #[error("HTTP {method} {path}: {message}")]
    Http {
        /// Request method.
        method: String,
        /// Request path and query.
        path: String,
        /// The transport error.
        message: String,
    },
    /// A condition polled for did not hold before its deadline.
    #[error("timed out after {seconds}s waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// The deadline in seconds.
        seconds: u64,
    },
    /// The store the cluster was asked to run on (`KUBE_MVP_STORE`) is not available.
    #[error("store: {0}")]
    Store(String),
    /// The shared harness (kubectl, polling: [`kube_mvp_testing`]) failed.
    #[error(transparent)]
    Testing(#[from] kube_mvp_testing::Error),
    /// A Python client script could not be run, failed, or printed no JSON.
    #[error("python: {0}")]
    Python(String),
}

/// The fixture's result type.
pub type Result<T, E = FixtureError> = std::result::Result<T, E>;
