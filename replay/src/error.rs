//! Errors that stop a run before or while it starts. Per-turn problems are not errors of the
//! run: they become records (`failed`, `timed_out`, ...), see [`crate::client`].

use std::path::PathBuf;
use tokentap_dataset::DatasetErrors;

/// Why a replay could not run (a turn's failure is its record's, not an error of the run).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Options that cannot work together, or a bad value.
    #[error("{0}")]
    Config(String),
    /// The dataset did not load (every problem, each with its line).
    /// (Not a `#[source]`: the message already holds every error, which `{:#}` would repeat.)
    #[error("dataset:\n{0}")]
    Dataset(DatasetErrors),
    /// The run's configuration cannot run (options, or options with this dataset).
    #[error(transparent)]
    RunConfig(#[from] tokentap_run::config::ConfigError),
    /// An endpoint's host has no address.
    #[error("cannot resolve the endpoint host {host:?}: {source}")]
    Resolve {
        /// The host as given.
        host: String,
        /// The resolver's error.
        #[source]
        source: std::io::Error,
    },
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
    /// A task of the run itself panicked or was lost (a bug).
    #[error("internal: {0}")]
    Internal(String),
}

impl From<DatasetErrors> for ReplayError {
    fn from(e: DatasetErrors) -> Self {
        ReplayError::Dataset(e)
    }
}
