//! Why the upstream side cannot start.

/// Why the upstream configuration is unusable.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("upstream URL {url:?}: {why}")]
    BadUrl { url: String, why: String },
    #[error("no --upstream given")]
    None,
    #[error("upstream CA file {path}: {why}")]
    Ca { path: String, why: String },
    #[error("TLS setup: {0}")]
    Tls(String),
}
