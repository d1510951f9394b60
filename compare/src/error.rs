//! Why a comparison could not run. Bad input names the file, the line (or list position) and
//! the field, and says what was expected.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A record that does not have the shape its format documents.
    #[error("{}:{at}: {msg}", path.display())]
    Parse {
        path: PathBuf,
        /// 1-based line (JSONL) or list position (JSON array).
        at: usize,
        msg: String,
    },
    #[error("{}: {msg}", path.display())]
    File { path: PathBuf, msg: String },
    #[error("no proxy records found in {}: expected records-*.jsonl files (tokentap proxy --records DIR) or a .jsonl file", path.display())]
    NoWire { path: PathBuf },
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
