//! # tokentap-submission — the tree the official checker reads
//!
//! An MLPerf Endpoints submission is a directory tree that the official submission checker
//! (`endpoints-submission-cli`, module `submission_checker`) reads and judges:
//!
//! ```text
//! <organization>/<submission>/
//!   src/tokentap/README.md               the implementation that ran the points
//!   docs/                                the submitter's documentation
//!   results/<system>/system_power.json   provisioned power (Standardized)
//!   results/<system>/<model>/r<C>/
//!     point.yaml             disclosure, runtime settings and seeds, warmup, steady state
//!     config.yaml            the configuration the point ran (the reference's config shape)
//!     result_summary.json    the point's numbers, as the run wrote them
//!     accuracy_results.json  the inline score; the SWE-bench result at one point per region
//!     system_desc.json       the system description, with C_max and the point's tps_utilization
//!     server_configs/        the engine-metrics scrape, the submitter's server files
//!     warmup.jsonl           the declared warmup's records, kept and linked
//! ```
//!
//! [`write`] lays one sweep directory out as that tree. What tokentap measured or derived it
//! writes itself; what only a submitter knows comes from the submitter file
//! ([`submitter::Submitter`]) and is never invented: without it the tree is still written and
//! every missing fact is listed with the checker rule that needs it ([`Missing`]).
//! docs/submission.md is the user's guide.
//!
//! ## Layout
//! - [`submitter`]: the submitter file, its checks (the checker's models) and its template.
//! - [`tree`]: the writer — point by point, and the submission-level files.
//! - [`cli`]: `tokentap submission template | write`.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod cli;
pub mod owner;
pub mod submitter;
pub mod tree;

use std::path::{Path, PathBuf};

pub use submitter::Submitter;

/// A fact the tree lacks, and the checker rule that will report it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Missing {
    /// The fact, as the submitter file names it.
    pub fact: String,
    /// The checker's rule id.
    pub rule: &'static str,
}

/// What was written.
#[derive(Debug, Clone)]
pub struct Written {
    /// `<out>/<organization>/<submission>`: the directory to give the checker.
    pub submission_dir: PathBuf,
    /// `results/<system>/<model>`.
    pub curve_dir: PathBuf,
    /// The points written (finished ones).
    pub points: Vec<u64>,
    /// Points not written, and why (not finished).
    pub skipped: Vec<(u64, String)>,
    /// Points of another sweep removed from the tree (asked for with `replace`), relative to
    /// `submission_dir`.
    pub replaced: Vec<PathBuf>,
    /// Facts the tree lacks.
    pub missing: Vec<Missing>,
}

/// Why a tree could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SubmissionError {
    /// A sweep file could not be read.
    #[error("{file}: {error}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        error: String,
    },
    /// A file of the tree could not be written.
    #[error("cannot write {file}: {error}")]
    Write {
        /// The file.
        file: String,
        /// Why.
        error: String,
    },
    /// The sweep has no finished point.
    #[error("{0}: no finished point to write")]
    NoPoints(String),
    /// The tree holds another sweep's points.
    #[error(
        "{root} holds points that are not this sweep's, {by}: {}; a submission holds one \
         sweep's points — write to another directory, or remove exactly these with --replace \
         (`tokentap sweep`: --submission-replace)",
        points.join(", ")
    )]
    Foreign {
        /// The tree's root.
        root: String,
        /// The other sweep's points.
        points: Vec<String>,
        /// Which sweep wrote them.
        by: String,
    },
}

impl SubmissionError {
    fn write(path: &Path, e: std::io::Error) -> SubmissionError {
        SubmissionError::Write {
            file: path.display().to_string(),
            error: e.to_string(),
        }
    }
}

/// Writes the submission tree of the sweep in `sweep_dir` under `out`. A tree holds one sweep's
/// points ([`owner`]): points of another sweep there refuse the write, or with `replace` are
/// removed, exactly they.
pub fn write(
    sweep_dir: &Path,
    out: &Path,
    submitter: Option<&Submitter>,
    replace: bool,
) -> Result<Written, SubmissionError> {
    tree::write_tree(&tree::Plan {
        sweep_dir,
        out,
        submitter,
        replace,
    })
}

/// Checks before a sweep runs that its tree under `out` holds no other sweep's points (always
/// passes with `replace`: they are removed at the first write).
pub fn preflight(
    sweep_dir: &Path,
    out: &Path,
    submitter: Option<&Submitter>,
    replace: bool,
) -> Result<(), SubmissionError> {
    tree::preflight(&tree::Plan {
        sweep_dir,
        out,
        submitter,
        replace,
    })
}

impl Written {
    /// The summary for the terminal: where the tree is, and what it lacks.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "submission tree: {} ({} points: {})",
            self.submission_dir.display(),
            self.points.len(),
            self.points
                .iter()
                .map(|c| format!("r{c}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        for p in &self.replaced {
            s += &format!("\n  removed (another sweep's, --replace): {}", p.display());
        }
        for (c, why) in &self.skipped {
            s += &format!("\n  r{c} not written: {why}");
        }
        if !self.missing.is_empty() {
            s += "\n  missing facts (the checker will report them):";
            for m in &self.missing {
                s += &format!("\n  - {} ({})", m.fact, m.rule);
            }
        }
        s
    }
}
