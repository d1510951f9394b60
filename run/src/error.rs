//! Errors of reading and writing the run directory's files.

use std::path::PathBuf;

/// A file of the run directory that could not be read, parsed or written.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Not the file's schema: where and why.
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("internal: {0}")]
    Internal(String),
}
