//! `OUT/sweep.json`: the regions, the points and the curve's verdict. Written from the plan on
//! (before the first point runs) and rewritten after every point, atomically (a temporary file
//! renamed over the old one), so a reader or a resumed sweep never sees half a file.

use crate::error::FileError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tokentap_mlperf::pareto::{CurveVerdict, RegionName, Regions};
use tokentap_mlperf::{Primary, Verdict};

/// `sweep.json`.
pub const FILE: &str = crate::files::SWEEP;
/// `sweep.json` format version.
pub const VERSION: u32 = 1;

/// Where a point of the plan stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PointStatus {
    /// In the plan, not started.
    Pending,
    /// Started; a sweep that died leaves this (rerun on resume).
    Running,
    /// Ran to its end (whatever its verdict).
    Done,
    /// Stopped by Ctrl-C: what it recorded is in its directory; rerun on resume.
    Interrupted,
    /// The run returned an error (named in `error`); rerun on resume.
    Failed,
}

/// The wire's view of a point (`--wire DIR`: the proxy's records), joined to the client's
/// tracked turns by session id and turn index within the point's time span.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireView {
    /// Tracked, completed client turns with a proxy record.
    pub turns_joined: u64,
    /// Tracked, completed client turns.
    pub client_turns: u64,
    /// p90 of the proxy's TTFT over the joined turns (tokentap's quantile, linear
    /// interpolation; not the reference's "lower" percentile), ms.
    pub ttft_p90_ms: Option<f64>,
    /// p90 of the client's TTFT over the same turns, ms (for the difference).
    pub client_ttft_p90_ms: Option<f64>,
}

/// One measurement point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The point's concurrency, C.
    pub concurrency: u64,
    /// `None`: outside every region (or regions unknown).
    pub region: Option<RegionName>,
    /// Directory under OUT: `r<C>`.
    pub dir: String,
    /// Where it stands.
    pub status: PointStatus,
    /// When it started, wall clock ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_wall_ns: Option<u64>,
    /// When it ended, wall clock ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_wall_ns: Option<u64>,
    /// The rules' primary metrics (MLPerf definitions, docs/benchmark.md#primary-metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<Primary>,
    /// The point's verdict under the rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// The point's failed validity rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// The reference inline scorer's accuracy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline_accuracy: Option<f64>,
    /// Minimum steady-state duration the point was run to (region × scale), s.
    pub min_duration_s: f64,
    /// Mean TTFT of the point's tracked, completed turns (tokentap's own, `summary.json`
    /// `latency_ms.ttft.mean`), ms: exact, so it can be set against the engine's histogram mean
    /// (also exact: its sum over its count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ttft_mean_ms: Option<f64>,
    /// Turns that ended `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns_ok: Option<u64>,
    /// Trajectories finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trajectories: Option<u64>,
    /// The wire's view (`--wire`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire: Option<WireView>,
    /// The engine's own numbers (`--engine-metrics`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineView>,
    /// Why the run failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Point {
    /// A pending point of the plan.
    pub fn new(concurrency: u64, region: Option<RegionName>, min_duration_s: f64) -> Point {
        Point {
            concurrency,
            region,
            dir: format!("r{concurrency}"),
            status: PointStatus::Pending,
            started_wall_ns: None,
            ended_wall_ns: None,
            primary: None,
            verdict: None,
            reasons: Vec::new(),
            inline_accuracy: None,
            min_duration_s,
            client_ttft_mean_ms: None,
            turns_ok: None,
            trajectories: None,
            wire: None,
            engine: None,
            error: None,
        }
    }

    /// Ran to its end.
    pub fn done(&self) -> bool {
        self.status == PointStatus::Done
    }

    /// The point's numbers from its run's summary (a live point's, or a merged one's).
    pub fn take_numbers(&mut self, s: &crate::summary::Summary) {
        self.primary = Some(s.mlperf.primary);
        self.verdict = Some(s.validity.verdict);
        self.reasons = s.validity.reasons.clone();
        self.inline_accuracy = s.accuracy.inline_accuracy;
        self.turns_ok = s.counts.turns.get("ok").copied();
        self.client_ttft_mean_ms = s.latency_ms.ttft.as_ref().map(|t| t.mean);
        self.trajectories = Some(s.run.trajectories_finished);
    }
}

/// `r<C>/point.json`: what one point of a sweep was and how it ran (beside its run's files).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PointFile {
    /// The tokentap version that ran it.
    pub tokentap_version: String,
    /// The point's concurrency, C.
    pub concurrency: u64,
    /// Its region, if any.
    pub region: Option<RegionName>,
    /// C_min/C_max of the regions, if known.
    pub regions: Option<Regions>,
    /// Where it stands.
    pub status: PointStatus,
    /// When it started, both clocks.
    pub start: Option<tokentap_core::clock::Anchor>,
    /// When it ended, both clocks.
    pub end: Option<tokentap_core::clock::Anchor>,
    /// Run to the rules' minimum duration unscaled.
    pub official_length: bool,
    /// The minimum duration it ran to, s.
    pub min_duration_s: f64,
    /// Its declared warmup, if any.
    pub warmup: Option<crate::summary::WarmupDeclaration>,
    /// The engine metrics endpoints scraped.
    pub engine_metrics: Vec<String>,
    /// The point's run configuration.
    pub config: crate::config::RunConfig,
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepFile {
    /// [`VERSION`].
    pub version: u32,
    /// This sweep's identity, made when its plan is first written ([`new_sweep_id`]); the
    /// submission tree it writes records it, so another sweep's points are told apart. Absent
    /// in files written before ids (given one when such a sweep is resumed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep_id: Option<String>,
    /// The tokentap version that wrote the plan.
    pub tokentap_version: String,
    /// `None` when C_min/C_max are unknown and cannot be inferred.
    pub regions: Option<Regions>,
    /// Where C_min/C_max came from: `given` or `inferred from the points`.
    pub regions_source: String,
    /// Minimum-duration scale; anything but 1 is a tuning sweep, not official.
    pub min_duration_scale: f64,
    /// An official curve: the minimum durations unscaled.
    pub official: bool,
    /// The official model preset whose gates apply, if any.
    pub gates: Option<String>,
    /// SWE-bench accuracy per mandatory region (from the separate phase), as given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub swe_bench: Vec<(RegionName, f64)>,
    /// The proxies' records directories (`--wire`), if any. (`wire_dir`, one directory, in
    /// files written before several were possible.)
    #[serde(
        default,
        alias = "wire_dir",
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub wire_dirs: Vec<PathBuf>,
    /// Engine metrics endpoints scraped per point (`--engine-metrics`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub engine_metrics: Vec<String>,
    /// The points of the plan, by concurrency.
    pub points: Vec<Point>,
    /// The curve's verdict (recomputed by [`SweepFile::judge`]).
    pub verdict: CurveVerdict,
    /// The replay configuration shared by every point (concurrency and output directory
    /// aside); a resumed sweep must match it.
    pub config: serde_json::Value,
}

/// A new sweep id: `sweep-` and 16 hex digits mixed from the wall clock, the process id and a
/// counter — unique among sweeps, not a secret.
pub fn new_sweep_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let salt = (u64::from(std::process::id()) << 32) ^ N.fetch_add(1, Ordering::Relaxed);
    let id = tokentap_core::rng::mix(now ^ tokentap_core::rng::mix(salt));
    format!("sweep-{id:016x}")
}

impl SweepFile {
    /// Reads `dir/sweep.json`, refusing another version.
    pub fn load(dir: &Path) -> Result<SweepFile, FileError> {
        let path = dir.join(FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| FileError::Io {
            what: "cannot read",
            path: path.clone(),
            source,
        })?;
        let f: SweepFile = serde_json::from_str(&text).map_err(|e| FileError::Parse {
            path: path.clone(),
            line: e.line(),
            message: e.to_string(),
        })?;
        if f.version != VERSION {
            return Err(FileError::Parse {
                path,
                line: 1,
                message: format!("version {} (this tokentap reads {VERSION})", f.version),
            });
        }
        Ok(f)
    }

    /// Writes `dir/sweep.json` atomically.
    pub fn save(&self, dir: &Path) -> Result<(), FileError> {
        let path = dir.join(FILE);
        let tmp = dir.join(".sweep.json.tmp");
        let mut text = serde_json::to_string_pretty(self)
            .map_err(|e| FileError::Internal(format!("serializing sweep.json: {e}")))?;
        text.push('\n');
        let io = |what, source| FileError::Io {
            what,
            path: path.clone(),
            source,
        };
        std::fs::write(&tmp, text).map_err(|e| io("cannot write", e))?;
        std::fs::rename(&tmp, &path).map_err(|e| io("cannot replace", e))?;
        Ok(())
    }

    /// The configuration every point shares (`config`: a run's `config.json` without the
    /// per-point keys), as a run's configuration.
    pub fn run_config(&self) -> Result<crate::config::RunConfig, serde_json::Error> {
        crate::config::RunConfig::deserialize(&self.config)
    }

    /// The point at concurrency `c`.
    pub fn point_mut(&mut self, c: u64) -> Option<&mut Point> {
        self.points.iter_mut().find(|p| p.concurrency == c)
    }

    /// Recomputes the curve's verdict from the points.
    pub fn judge(&mut self) {
        let official = self.gates.as_deref().and_then(official_by_name);
        let facts: Vec<_> = self
            .points
            .iter()
            .map(|p| tokentap_mlperf::pareto::PointFacts {
                concurrency: p.concurrency,
                finished: p.done(),
                verdict: p.verdict.unwrap_or(Verdict::Incomplete),
                reasons: p.reasons.clone(),
                inline_accuracy: p.inline_accuracy,
            })
            .collect();
        let mut v = tokentap_mlperf::pareto::verdict(
            self.regions.as_ref(),
            official.as_ref(),
            &facts,
            &self.swe_bench,
        );
        if !self.official {
            v.rules.push(tokentap_mlperf::pareto::CurveRule {
                rule: "official_length".into(),
                status: tokentap_mlperf::validity::Status::Fail,
                message: format!(
                    "minimum durations scaled by {} for tuning: not an official curve",
                    self.min_duration_scale
                ),
            });
            v.verdict = Verdict::Invalid;
        }
        self.verdict = v;
    }
}

/// The official gates by the preset's model name.
pub fn official_by_name(name: &str) -> Option<tokentap_mlperf::Official> {
    tokentap_mlperf::validity::officials()
        .into_iter()
        .find(|o| o.model == name)
}

/// A path, a list of paths, or null.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(PathBuf),
        Many(Vec<PathBuf>),
    }
    Ok(match Option::<OneOrMany>::deserialize(d)? {
        None => Vec::new(),
        Some(OneOrMany::One(p)) => vec![p],
        Some(OneOrMany::Many(v)) => v,
    })
}

/// Quantiles of one engine histogram over the point, ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quantiles {
    /// Observations during the point.
    pub count: f64,
    /// Their mean.
    pub mean_ms: Option<f64>,
    /// Median.
    pub p50_ms: Option<f64>,
    /// 90th percentile.
    pub p90_ms: Option<f64>,
    /// 99th percentile.
    pub p99_ms: Option<f64>,
    /// The series it came from.
    pub series: String,
}

/// What scraping cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScrapeCost {
    /// Scrapes made.
    pub scrapes: u64,
    /// Scrapes that failed.
    pub failed: u64,
    /// Response bytes read.
    pub bytes: u64,
    /// Wall time spent fetching and parsing, ms (a bound on the CPU it took).
    pub busy_ms: f64,
}

/// The engine's own numbers for one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineView {
    /// `vllm`, `sglang`, `llamacpp` (no latency histograms: the mean ITL from its generation-time
    /// counter and the prefix-cache hit rate only), or `unknown` (no known series).
    pub flavor: String,
    /// The metrics endpoints scraped.
    pub endpoints: Vec<String>,
    /// Time to first token.
    pub ttft: Option<Quantiles>,
    /// Inter-token latency.
    pub itl: Option<Quantiles>,
    /// End to end.
    pub e2e: Option<Quantiles>,
    /// Time in the engine's queue.
    pub queue: Option<Quantiles>,
    /// vLLM: Δ prefix_cache_hits / Δ prefix_cache_queries (tokens); SGLang: Δ cached_tokens /
    /// Δ prompt_tokens.
    pub prefix_cache_hit_rate: Option<f64>,
    /// What scraping cost.
    pub cost: ScrapeCost,
    /// The raw samples, relative to the point's directory.
    pub samples_file: String,
    /// The last scrape error, if any scrape failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}
