//! Errors of reading and writing the run directory's files.

use std::path::PathBuf;

/// A file of the run directory that could not be read, parsed or written.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file could not be read or written.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was attempted (`cannot read`, …).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// Not the file's schema: where and why.
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The line (1-based).
        line: usize,
        /// What was found and what was expected.
        message: String,
    },
    /// A file that could not be serialized (a bug).
    #[error("internal: {0}")]
    Internal(String),
}
