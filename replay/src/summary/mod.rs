//! The run summary: its schema is `tokentap_run::summary` (`summary.json`); here it is built
//! from the run's aggregate (`build.rs`) and rendered for the terminal by `Summary::render_text`.

pub use tokentap_run::summary::*;

use crate::collector::Aggregate;
use tokentap_core::clock::Anchor;
use tokentap_mlperf::{result_summary, Scores};

/// The turns that did not end `ok`, by `error.kind`, most turns first.
fn error_counts(agg: &Aggregate) -> Vec<ErrorCount> {
    let mut v: Vec<ErrorCount> = agg
        .errors
        .iter()
        .map(|(k, (n, m))| ErrorCount {
            kind: k.clone(),
            turns: *n,
            first_message: m.clone(),
        })
        .collect();
    v.sort_by(|a, b| b.turns.cmp(&a.turns).then_with(|| a.kind.cmp(&b.kind)));
    v
}

/// Inputs besides the aggregate.
pub(crate) struct RunFacts {
    pub start: Anchor,
    pub end: Anchor,
    pub interrupted: bool,
    pub stopped_by: Option<StopReason>,
    pub window_closed: Option<u64>,
    pub last_claim: Option<u64>,
    pub budget_local: u64,
    pub trajectories_started: u64,
    pub trajectories_finished: u64,
    pub scores: Scores,
    /// The reference tokenizer's folder and its fallback count / first template error.
    pub tokenizer: Option<(String, u64, Option<String>)>,
    pub warmup: Option<WarmupDeclaration>,
    pub dataset_size: u64,
    /// Per-row sampling overrides (other than `model`) in the dataset's client rows.
    pub row_overrides: Vec<String>,
}

/// What a finished run produced: the summary and the reference's two files.
pub(crate) struct Built {
    pub summary: Summary,
    pub result_summary: result_summary::Inputs,
    pub scores: Scores,
}

mod build;
pub(crate) use build::build;
