//! Why the upstream side cannot start.

/// Why the upstream configuration is unusable.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// An `--upstream` that is not a usable URL.
    #[error("upstream URL {url:?}: {why}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// Why.
        why: String,
    },
    /// No `--upstream`.
    #[error("no --upstream given")]
    None,
    /// `--upstream-ca` could not be read.
    #[error("upstream CA file {path}: {why}")]
    Ca {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// The upstream TLS client could not be set up.
    #[error("TLS setup: {0}")]
    Tls(String),
}
