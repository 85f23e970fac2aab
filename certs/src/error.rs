//! The crate's error type.

use std::path::PathBuf;

/// Why a PKI could not be generated or written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// rcgen could not generate a key or sign a certificate.
    #[error("certificate generation failed")]
    Rcgen(#[from] rcgen::Error),
    /// A file or folder could not be created or written.
    #[error("failed to write {path}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The PKI spec is unusable: no servers, a duplicate or malformed server name, a bad DNS name.
    #[error("invalid server spec: {0}")]
    InvalidServerSpec(String),
    /// A client certificate was asked for more groups (`O=`) than rcgen can encode.
    #[error("a client certificate can carry at most {max} groups, {count} were given")]
    TooManyGroups {
        /// How many groups were asked for.
        count: usize,
        /// [`crate::MAX_GROUPS`].
        max: usize,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
