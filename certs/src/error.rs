//! The crate's error type.

use std::path::PathBuf;

/// Why a PKI could not be generated or written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// rcgen could not generate a key or sign a certificate.
    #[error("certificate generation failed: {0}")]
    Rcgen(#[from] rcgen::Error),
    /// A file could not be written.
    #[error("failed to write {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The PKI specification is not usable (no servers, duplicate or invalid names).
    #[error("invalid server spec: {0}")]
    InvalidServerSpec(String),
    /// A server name that the PKI has no certificate for.
    #[error("no server named {0:?} in this PKI")]
    UnknownServer(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
