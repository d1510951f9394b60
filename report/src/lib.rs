//! # tokentap-report — the run report
//!
//! After a run people want something to look at, with numbers they can publish. This crate
//! turns a replay run directory (`records.jsonl`, `summary.json`, `config.json`; see
//! `docs/records.md`) into one self-contained HTML file — inline CSS, inline SVG plots, a few
//! lines of inline JS that only self-check; nothing from the network — or Markdown / JSON text.
//! Published numbers (the summary table) come from `summary.json`, i.e. from raw samples; the
//! plots are drawn from the raw records.
//!
//! ## Layout
//!
//! - [`load`]: reads the run directory into [`Run`] and derives the plotted series.
//! - [`svg`]: scatter, line, bar and swimlane charts as inline SVG.
//! - [`html`]: the page (verdict, summary table, plots, optional `compare.json` section).
//! - [`text`]: `--format md` and `--format json`.
//! - [`dataset`]: `tokentap dataset stats A --against B --html`: two datasets' shapes side by
//!   side, in the same style.
//!
//! ## Data flow
//!
//! ```text
//!  RUN_DIR/{records.jsonl, summary.json, config.json, compare.json?}
//!        └─► load::Run ─┬─► html::render ─► report.html   (default; replay writes it at the end)
//!                       └─► text::{markdown, json} ─► stdout or --out
//! ```
//!
//! Dependencies: `tokentap-core` and `tokentap-mlperf` (for `--tokenizer`: the reference's
//! counts of recorded outputs). The replay depends on this crate to write `report.html` at the
//! end of a run, so this crate must not depend on the replay.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod dataset;
pub mod error;
pub mod html;
pub mod load;
pub mod sessions;
pub mod svg;
pub mod text;

pub use error::ReportError;
pub use load::Run;

use anyhow::Context as _;
use std::path::{Path, PathBuf};

/// Output format of `tokentap report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One self-contained HTML file (default: `RUN_DIR/report.html`).
    Html,
    /// Markdown (default: stdout).
    Md,
    /// JSON (default: stdout).
    Json,
}

/// `tokentap report` options.
#[derive(Debug, Clone, clap::Args)]
pub struct Opts {
    /// A replay run directory (`tokentap replay --out DIR`), a sweep directory, or a proxy's
    /// records directory (`tokentap proxy --records DIR`): where each session's time went —
    /// waiting on the model, or between turns (html: `DIR/sessions.html`).
    pub run_dir: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "html")]
    pub format: Format,
    /// Output file. Default: `RUN_DIR/report.html` for html, stdout for md and json.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The model's Hugging Face tokenizer folder: count every recorded output (a run with
    /// `replay --record-outputs`) the MLPerf reference's way and show the primary metrics from
    /// those counts. Read locally; nothing is downloaded.
    #[arg(long, value_name = "DIR")]
    pub tokenizer: Option<PathBuf>,
    /// The records directory of a tokentap proxy that was in the path (`tokentap proxy
    /// --records DIR`); repeat it for a proxy beside each replica (their records are one wire
    /// view). A sweep: the wire's TTFT is joined to every point, written to `sweep.json` and
    /// shown beside the client's. One run: the run's records are compared with the wire
    /// (`tokentap compare --format tokentap`), written to `RUN_DIR/compare.json` and shown in
    /// the report.
    #[arg(long, value_name = "DIR")]
    pub wire: Vec<PathBuf>,
}

/// Renders the report of `run_dir` as HTML.
pub fn render_html(run_dir: &Path) -> Result<String, ReportError> {
    Ok(html::render(&Run::load(run_dir)?))
}

/// Writes `run_dir/report.html` and returns its path. The replay calls this at the end of a
/// run with `--out`.
pub fn write_html(run_dir: &Path) -> Result<PathBuf, ReportError> {
    let page = render_html(run_dir)?;
    let path = run_dir.join("report.html");
    std::fs::write(&path, page).map_err(|source| ReportError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// `tokentap report`: exit code 0 on success.
pub fn run(opts: Opts) -> anyhow::Result<i32> {
    if sessions::is_records_dir(&opts.run_dir) {
        return sessions_report(opts);
    }
    let mut run = Run::load_with(&opts.run_dir, opts.tokenizer.is_some())?;
    if let Some(dir) = &opts.tokenizer {
        let tok = tokentap_mlperf::RefTokenizer::load(dir)
            .with_context(|| format!("--tokenizer {}", dir.display()))?;
        let n = run.recount(&tok);
        eprintln!(
            "recounted {} recorded outputs with {} ({} ok turns carry no output)",
            n.recounted,
            dir.display(),
            n.without_output
        );
    }
    let (text, default_out) = match opts.format {
        Format::Html => (html::render(&run), Some(opts.run_dir.join("report.html"))),
        Format::Md => (text::markdown(&run), None),
        Format::Json => (
            serde_json::to_string_pretty(&text::json(&run)).context("serializing the report")?
                + "\n",
            None,
        ),
    };
    write_out(opts.out.or(default_out), &text)
}

/// A proxy's records directory: where each agent session's time went.
fn sessions_report(opts: Opts) -> anyhow::Result<i32> {
    let r = sessions::SessionsReport::load(&opts.run_dir)?;
    let (text, default_out) = match opts.format {
        Format::Html => (r.html(), Some(opts.run_dir.join("sessions.html"))),
        Format::Md => (r.markdown(), None),
        Format::Json => (
            serde_json::to_string_pretty(&r).context("serializing the report")? + "\n",
            None,
        ),
    };
    write_out(opts.out.or(default_out), &text)
}

fn write_out(out: Option<PathBuf>, text: &str) -> anyhow::Result<i32> {
    match out {
        Some(path) => {
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("report written to {}", path.display());
        }
        None => print!("{text}"),
    }
    Ok(0)
}
