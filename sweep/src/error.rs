//! Errors that stop a sweep. A point's own problems (failed turns, an invalid point) are not
//! errors: they are in the point's records and in the curve's verdict.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// Options that cannot work together, or a bad value.
    #[error("{0}")]
    Config(String),
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// `sweep.json` could not be read, parsed or written.
    #[error(transparent)]
    File(#[from] tokentap_run::error::FileError),
    /// `OUT` holds a sweep made with other settings.
    #[error("{} holds a sweep with other settings ({fields}); resume with the same options, or give another --out", dir.display())]
    Mismatch { dir: PathBuf, fields: String },
    #[error("internal: {0}")]
    Internal(String),
}
