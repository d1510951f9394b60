//! `tokentap sweep`'s options: every replay option, per point, and the sweep's own.

use std::path::PathBuf;
use std::time::Duration;
use tokentap_mlperf::pareto::RegionName;
use tokentap_replay::RunOpts;

/// `tokentap sweep` options: every `tokentap replay` option with the same meaning (per point),
/// plus the points. Environment variables follow one rule: an option reads
/// `TOKENTAP_<COMMAND>_<FLAG>` of the command that declares it, so a replay option keeps its
/// `TOKENTAP_REPLAY_*` name under `tokentap sweep` (one name per option, whichever command
/// runs it), and the sweep's own options read `TOKENTAP_SWEEP_*`.
#[derive(clap::Args, Debug, Clone)]
#[group(id = "SweepOpts")]
pub struct Opts {
    /// Every replay option, for each point.
    #[command(flatten)]
    pub run: RunOpts,
    /// The points' concurrencies, e.g. `1,4,16,64` (one measurement point each); without it,
    /// --c-min and --c-max propose a plan.
    #[arg(
        long,
        env = "TOKENTAP_SWEEP_CONCURRENCY",
        value_delimiter = ',',
        num_args = 1,
        value_name = "N",
        value_parser = tokentap_core::value::positive::<usize>,
        help_heading = "Load"
    )]
    pub concurrency: Vec<usize>,
    /// The submission's C_max. With --c-min and without --concurrency: a plan is proposed
    /// (one ultra-low point and the rest spread evenly over low, medium and high).
    #[arg(
        long,
        env = "TOKENTAP_SWEEP_C_MAX",
        value_name = "N",
        help_heading = "Sweep"
    )]
    pub c_max: Option<u64>,
    /// Points of the proposed plan (7 to 32; default 7, the minimum).
    #[arg(
        long,
        env = "TOKENTAP_SWEEP_POINTS",
        value_name = "K",
        help_heading = "Sweep"
    )]
    pub points: Option<usize>,
    /// Print the regions and the plan, write OUT/sweep.json, and run nothing.
    #[arg(long, env = "TOKENTAP_SWEEP_PLAN", help_heading = "Sweep")]
    pub plan: bool,
    /// The server's Prometheus endpoint (vLLM `vllm:*`, SGLang `sglang:*`), e.g.
    /// http://127.0.0.1:8000/metrics; repeatable (one per replica). Scraped at the start and end
    /// of every point and every --engine-interval in between.
    #[arg(
        long = "engine-metrics",
        env = "TOKENTAP_SWEEP_ENGINE_METRICS",
        value_name = "URL",
        help_heading = "Sweep"
    )]
    pub engine_metrics: Vec<String>,
    /// Time between engine scrapes within a point.
    #[arg(long, env = "TOKENTAP_SWEEP_ENGINE_INTERVAL", value_parser = tokentap_core::duration::parse, default_value = "5s", value_name = "DURATION", help_heading = "Sweep")]
    pub engine_interval: Duration,
    /// The records directory of a tokentap proxy in the path (`tokentap proxy --records DIR`):
    /// the wire's TTFT p90 is shown beside the client's per point. Repeat it for a proxy beside
    /// each replica: their records are one wire view.
    #[arg(
        long,
        env = "TOKENTAP_SWEEP_WIRE",
        value_name = "DIR",
        help_heading = "Sweep"
    )]
    pub wire: Vec<PathBuf>,
    /// SWE-bench accuracy of the run in a mandatory region (from the separate SWE-bench phase),
    /// e.g. `ultra_low=0.95`; one per region (comma-separated or repeated). Their mean decides
    /// the curve's SWE-bench gate.
    #[arg(long = "swe-bench-accuracy", env = "TOKENTAP_SWEEP_SWE_BENCH_ACCURACY", value_name = "REGION=FRACTION", value_delimiter = ',', value_parser = parse_swe, help_heading = "Sweep")]
    pub swe_bench: Vec<(RegionName, f64)>,
    /// With --shard I/N: a directory every shard can write (the shared volume). Before each
    /// point, each shard leaves a marker there and waits for all N, so the shards of a point
    /// start together and no shard's point overlaps another's. Then `tokentap merge` joins the
    /// N sweep directories point by point.
    #[arg(
        long,
        env = "TOKENTAP_SWEEP_BARRIER",
        value_name = "DIR",
        help_heading = "Sweep"
    )]
    pub barrier: Option<PathBuf>,
    /// Write the curve as the submission tree the official checker reads, under DIR
    /// (`DIR/<organization>/<submission>/results/<system>/<model>/r<C>/`), after every point;
    /// rerunning a finished sweep with it writes the tree without running anything.
    /// docs/submission.md.
    #[arg(
        long,
        env = "TOKENTAP_SWEEP_SUBMISSION",
        value_name = "DIR",
        help_heading = "Sweep"
    )]
    pub submission: Option<PathBuf>,
    /// The submitter file (YAML): what only the submitter knows — organisation, system,
    /// division, model precision, links, cohort, system description, power
    /// (`tokentap submission template` prints one to fill in). Without it the tree is written
    /// with everything tokentap knows and every missing fact is listed.
    #[arg(
        long,
        env = "TOKENTAP_SWEEP_SUBMITTER",
        value_name = "FILE",
        requires = "submission",
        help_heading = "Sweep"
    )]
    pub submitter: Option<PathBuf>,
    /// Remove the points of the `--submission` tree that another sweep wrote (each is named)
    /// instead of refusing to start: a submission holds one sweep's points.
    #[arg(
        long,
        env = "TOKENTAP_SWEEP_SUBMISSION_REPLACE",
        requires = "submission",
        help_heading = "Sweep"
    )]
    pub submission_replace: bool,
}

impl Opts {
    /// Parses options from an argument list (without a program name), as `tokentap sweep`
    /// would. For tests and embedding (the demo).
    pub fn try_parse_from_args<I, T>(args: I) -> Result<Opts, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        tokentap_replay::config::parse_args("sweep", args)
    }
}

pub(crate) fn parse_swe(s: &str) -> Result<(RegionName, f64), String> {
    let (r, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected REGION=FRACTION, e.g. low=0.94"))?;
    let region = RegionName::read(r.trim())
        .ok_or_else(|| format!("{r:?}: not a region (ultra_low, low, medium, high)"))?;
    let v: f64 = v
        .trim()
        .parse()
        .map_err(|_| format!("{v:?}: expected a fraction 0…1"))?;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("{v}: expected a fraction 0…1"));
    }
    Ok((region, v))
}
