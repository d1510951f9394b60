//! # tokentap-sweep — the benchmark as a curve
//!
//! An MLPerf Endpoints submission is a Pareto curve, not a number: 7 to 32 measurement points,
//! each a full replay at one target concurrency, placed in regions computed from the
//! submitter's C_min and C_max (docs/benchmark.md#pareto). `tokentap sweep` runs that curve: it
//! plans the points (or takes them), prints the regions, runs every point as `tokentap replay`
//! would (same options, same meaning, each point measured the benchmark's way), judges the curve,
//! and draws it.
//!
//! ## Layout
//! - this file: [`Opts`], [`Sweep`] (options checked, the dataset loaded), and the loop over
//!   points ([`run_with`]): resume, Ctrl-C, `sweep.json` and the report after every point.
//! - `plan`: [`Plan`] — the points and their regions, given or proposed ([`plan()`]).
//! - `point`: one point — its replay, `point.json`, the engine scraped over its measured phase,
//!   the wire's view.
//! - [`file`]: `sweep.json` (regions, points, verdict), written atomically.
//! - [`engine`]: `--engine-metrics`: the server's own Prometheus view per point.
//! - [`wire`]: `--wire`: the proxy's TTFT beside the client's per point.
//! - [`report`]: the sweep report (HTML with the Pareto plots, Markdown, JSON) and the terminal
//!   table.
//! - [`merge`]: `tokentap merge` of the N sweep directories of a sharded sweep (`--shard I/N
//!   --barrier DIR` on N machines), point by point.
//!
//! The regions, the proposed plan and the curve's verdict are the benchmark's rules and live
//! in `tokentap_mlperf::pareto`.
//!
//! ## Files
//! ```text
//!  OUT/sweep.json                 plan, regions, per point: status, primary metrics, verdict;
//!                                 the curve's verdict — rewritten after every point
//!  OUT/report.html                the sweep report (also `tokentap report OUT`)
//!  OUT/r<C>/point.json            concurrency, region, start/end, warmup, config, version
//!  OUT/r<C>/{records.jsonl, summary.json, result_summary.json, scores.json, report.html, …}
//!  OUT/r<C>/engine-metrics.jsonl  raw engine samples (with --engine-metrics)
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod engine;
pub mod error;
pub mod file;
pub mod lock;
pub mod merge;
pub mod opts;
mod plan;
mod point;
pub mod report;
pub mod run;
pub mod wire;

pub use error::SweepError;
pub use file::{Point, PointStatus, SweepFile};
pub use plan::{plan, Plan};

pub use opts::Opts;
pub use run::{attach_wire, compared_config, run, run_with, SubmissionTarget, Sweep, SweepOutcome};

/// Exit code of a sweep that ran but whose curve is not valid.
pub const EXIT_NOT_VALID: i32 = 3;
