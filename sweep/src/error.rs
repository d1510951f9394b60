//! Errors that stop a sweep. A point's own problems (failed turns, an invalid point) are not
//! errors: they are in the point's records and in the curve's verdict.

use std::path::PathBuf;

/// Why a sweep could not run or go on.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// Options that cannot work together, or a bad value.
    #[error("{0}")]
    Config(String),
    /// A file could not be read or written.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was attempted.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not what it should be: where and why.
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The line (1-based).
        line: usize,
        /// What was found and what was expected.
        message: String,
    },
    /// `sweep.json` could not be read, parsed or written.
    #[error(transparent)]
    File(#[from] tokentap_run::error::FileError),
    /// `OUT` holds a sweep made with other settings.
    #[error("{} holds a sweep with other settings ({fields}); resume with the same options, or give another --out", dir.display())]
    Mismatch {
        /// The sweep's directory.
        dir: PathBuf,
        /// The settings that differ.
        fields: String,
    },
    /// A bug.
    #[error("internal: {0}")]
    Internal(String),
}
