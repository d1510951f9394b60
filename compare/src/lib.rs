//! # tokentap-compare — check a benchmark client's timing claims against the wire
//!
//! Benchmark clients publish TTFT and ITL that their users cannot check: Python event loops
//! inflate TTFT under load, per-chunk ITL is wrong when chunks carry several tokens, a clock
//! started after connection setup hides time. With `tokentap proxy` in the path, every turn the
//! client sent was also measured on the wire. `tokentap compare` joins the client's per-request
//! output to the proxy's records turn by turn and says, per metric and per claimed percentile,
//! how far the client is from what crossed the wire.
//!
//! ## What client − wire means
//! The client times from its send, the proxy from its receipt of the request head; both time the
//! first text chunk and the last byte on their own side. So client TTFT − wire TTFT = the
//! client's send path + one loopback hop + its receive path: small and positive for an honest
//! client. Large values are client overhead (event loop, parsing) or queueing inside the client;
//! negative values mean the client's clock started after the request left (e.g. after
//! connection setup) — findings, not errors.
//!
//! ## Layout
//! - [`client`]: the normalised client view ([`ClientTurn`], [`Metric`], [`Clock`], the
//!   [`client::Verdict`] of a claim or a check).
//! - [`formats`]: one parser per client format (`tokentap`, `mlperf`, `aiperf`, `inference-perf`),
//!   and `formats::json`, the JSON reading they share.
//! - [`wire`]: the proxy's records and their per-turn values.
//! - [`join`]: request id → session + order (anchors break ties) → time.
//! - [`report`]: distributions, claims, verdicts and the `--json` schema; [`render`]: the
//!   terminal table.
//!
//! ## Data flow
//! ```text
//!  client file ──formats::load──► ClientRun ─┐
//!                                            ├─► join::join ──► Joined ──► report::build ──► Report
//!  proxy records ──wire::load──► [WireTurn] ─┘                                 │
//!                                                   terminal table ◄───────────┴──► --json FILE
//! ```
//!
//! Exit status of [`run`]: 0 when every judged claim passes, 2 when a claim fails (or nothing
//! could be judged, or `--require-all-joined` found unjoined turns), 1 on bad input.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod client;
pub mod error;
pub mod formats;
pub mod join;
pub mod render;
pub mod report;
pub mod totals;
pub mod wire;

pub use client::{ClientRun, ClientTurn, Clock, Metric};
pub use error::CompareError;
pub use formats::{Format, PublishedSource};
pub use join::{JoinConfig, JoinMethod};
pub use report::{Report, Tolerance, Verdict};

use anyhow::Context as _;
use std::path::PathBuf;
use std::time::Duration;

/// `tokentap compare` options.
#[derive(Debug, Clone, clap::Args)]
pub struct Opts {
    /// Proxy records: the `--records` directory of `tokentap proxy` (its `records-*.jsonl`) or a
    /// `.jsonl` file. Repeatable.
    #[arg(long, required = true)]
    pub wire: Vec<PathBuf>,
    /// The client's per-request output (see --format).
    #[arg(long)]
    pub client: PathBuf,
    /// The client's output format; `auto` (the default) tells it from the file's first records.
    /// A file of another format than the one given is refused, naming what it is.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: Format,
    /// Write the full comparison as JSON (schema in docs/compare.md), including every joined
    /// pair (client vs wire per turn).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Absolute tolerance of a time claim (a duration: 1ms, 500us).
    #[arg(long, value_name = "DURATION", default_value = "1ms",
        value_parser = tokentap_core::duration::parse)]
    pub time_tolerance: Duration,
    /// Relative tolerance of any claim, percent of the wire's value. A claim passes when
    /// |client − wire| ≤ max(absolute, relative).
    #[arg(long, default_value_t = 5.0, value_parser = tokentap_core::value::non_negative)]
    pub tolerance_pct: f64,
    /// Absolute tolerance of an output-token claim, tokens.
    #[arg(long, default_value_t = 0.0, value_parser = tokentap_core::value::non_negative)]
    pub tolerance_tokens: f64,
    /// Request header whose recorded value is the client's request id (repeatable).
    #[arg(long = "id-header", default_value = "X-Request-ID")]
    pub id_headers: Vec<String>,
    /// How far a wire start may precede the client's start when joining by session + order or
    /// time (a duration).
    #[arg(long, value_name = "DURATION", default_value = "50ms",
        value_parser = tokentap_core::duration::parse)]
    pub join_slack: Duration,
    /// How far a wire start may follow the client's start when joining (a duration).
    #[arg(long, value_name = "DURATION", default_value = "10s",
        value_parser = tokentap_core::duration::parse)]
    pub join_window: Duration,
    /// The clock of the client's start instants, for formats that carry both (tokentap records:
    /// `wall` when the replay ran on another host than the proxy).
    #[arg(long, value_enum)]
    pub clock: Option<Clock>,
    /// The client's published summary (AIPerf: profile_export_aiperf.json; default: beside the
    /// client file, when present).
    #[arg(long, value_name = "FILE", conflicts_with = "no_published")]
    pub published: Option<PathBuf>,
    /// Ignore published summaries: judge percentiles recomputed from the client's per-turn values.
    #[arg(long)]
    pub no_published: bool,
    /// Fail when any turn is only on one side.
    #[arg(long)]
    pub require_all_joined: bool,
    /// The model's Hugging Face tokenizer folder: count the MLPerf client's outputs the
    /// reference's way (OSL, the TPOT denominator), to judge its published OSL and TPOT.
    #[arg(long, value_name = "DIR")]
    pub tokenizer: Option<PathBuf>,
    /// The dataset the MLPerf client ran: score its outputs again with the reference scorer and
    /// check the published scores.json.
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    /// Print nothing but the verdict line.
    #[arg(long, short)]
    pub quiet: bool,
}

impl Opts {
    /// The options of `tokentap compare --wire W… --client C --format F` with every other flag
    /// at its default (for tests and embedding).
    pub fn new(format: Format, client: PathBuf, wire: Vec<PathBuf>) -> Opts {
        Opts {
            wire,
            client,
            format,
            json: None,
            time_tolerance: Duration::from_millis(1),
            tolerance_pct: 5.0,
            tolerance_tokens: 0.0,
            id_headers: vec!["X-Request-ID".into()],
            join_slack: Duration::from_millis(50),
            join_window: Duration::from_secs(10),
            clock: None,
            published: None,
            no_published: false,
            require_all_joined: false,
            quiet: false,
            tokenizer: None,
            dataset: None,
        }
    }
}

/// Reads, joins and judges; returns the report (no printing, no files).
pub fn compare(opts: &Opts) -> Result<Report, CompareError> {
    let tolerance = Tolerance {
        ms: opts.time_tolerance.as_nanos() as f64 / 1e6,
        pct: opts.tolerance_pct,
        tokens: opts.tolerance_tokens,
    };
    let join_cfg = JoinConfig {
        id_headers: opts
            .id_headers
            .iter()
            .map(|h| h.to_ascii_lowercase())
            .collect(),
        slack_ns: opts.join_slack.as_nanos() as u64,
        window_ns: opts.join_window.as_nanos() as u64,
    };
    let published = match (&opts.published, opts.no_published) {
        (_, true) => PublishedSource::Off,
        (Some(p), false) => PublishedSource::File(p.clone()),
        (None, false) => PublishedSource::Beside,
    };
    let tokenizer = match &opts.tokenizer {
        Some(d) => {
            Some(
                tokentap_mlperf::RefTokenizer::load(d).map_err(|e| CompareError::File {
                    path: d.clone(),
                    msg: format!("--tokenizer: {e}"),
                })?,
            )
        }
        None => None,
    };
    let dataset = match &opts.dataset {
        Some(p) => Some(
            tokentap_dataset::Dataset::load(p).map_err(|e| CompareError::File {
                path: p.clone(),
                msg: e.to_string(),
            })?,
        ),
        None => None,
    };
    let reference = formats::Reference {
        tokenizer: tokenizer.as_ref(),
        dataset: dataset.as_ref(),
    };
    let format = formats::resolve(opts.format, &opts.client)?;
    let client = formats::load(format, &opts.client, opts.clock, &published, &reference)?;
    let (wire, ignored) = wire::load(&opts.wire)?;
    let mut client = client;
    if format == Format::VllmBench {
        if let Some(note) = formats::vllm_bench::bind_request_ids(&mut client, &wire) {
            client.notes.push(note);
        }
        if let Some(note) = formats::vllm_bench::align_starts(&mut client, &wire) {
            client.notes.push(note);
        }
    }
    let joined = join::join(&client, &wire, &join_cfg);
    Ok(report::build(
        &client,
        &wire,
        ignored,
        &joined,
        &report::Settings {
            format,
            client_file: opts.client.display().to_string(),
            wire: opts.wire.iter().map(|p| p.display().to_string()).collect(),
            tolerance,
            join: join_cfg,
            require_all_joined: opts.require_all_joined,
        },
    ))
}

/// `tokentap compare`: prints the table (or only the verdict with `--quiet`), writes `--json`,
/// returns the exit status (0 pass, 2 fail or nothing judged).
pub fn run(opts: Opts) -> anyhow::Result<i32> {
    let report = compare(&opts)?;
    if opts.quiet {
        println!("verdict: {}", report.headline);
    } else {
        print!("{}", report.render_text());
    }
    if let Some(path) = &opts.json {
        let mut text = serde_json::to_string_pretty(&report).context("serializing the report")?;
        text.push('\n');
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(match report.verdict {
        Verdict::Pass => 0,
        _ => 2,
    })
}
