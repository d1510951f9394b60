//! Why a comparison could not run. Bad input names the file, the line (or list position) and
//! the field, and says what was expected.

use std::path::PathBuf;

/// Why a comparison could not run.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// A file could not be read or written.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was attempted.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// A record that does not have the shape its format documents.
    #[error("{}:{at}: {msg}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line (JSONL) or list position (JSON array).
        at: usize,
        /// The field, and what was expected.
        msg: String,
    },
    /// A file that is not what it should be as a whole.
    #[error("{}: {msg}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        msg: String,
    },
    /// No proxy records where the wire's were to be.
    #[error("no proxy records found in {}: expected records-*.jsonl files (tokentap proxy --records DIR) or a .jsonl file", path.display())]
    NoWire {
        /// The path given.
        path: PathBuf,
    },
}

impl CompareError {
    pub(crate) fn parse(path: &std::path::Path, at: usize, msg: impl Into<String>) -> Self {
        CompareError::Parse {
            path: path.to_path_buf(),
            at,
            msg: msg.into(),
        }
    }
}
