//! Why a report could not be made. Each error names the file (and line) it is about.

use std::path::PathBuf;

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// A file is not what it should be.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was found and what was expected.
        message: String,
    },
    /// A line of the records is not a turn record.
    #[error("{path} line {line}: not a turn record: {message}")]
    Record {
        /// The records file.
        path: PathBuf,
        /// The line (1-based).
        line: usize,
        /// Why.
        message: String,
    },
    /// The report could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
}
