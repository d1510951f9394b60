//! One sweep: the options checked and bound to the dataset ([`Sweep`]), its points run in turn
//! (resumed where a sweep left off), the curve judged, `sweep.json`, the report and the
//! submission tree written.

use crate::opts::Opts;
use crate::{
    engine, file, lock, plan, point, report, wire, Plan, Point, SweepError, SweepFile,
    EXIT_NOT_VALID,
};
use anyhow::Context as _;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokentap_dataset::Dataset;
use tokentap_mlperf::pareto::{self, RegionName};
use tokentap_replay::{ProgressMode, RunConfig};
use tokio_util::sync::CancellationToken;

/// Everything a sweep needs, options already checked.
pub struct Sweep {
    /// The replay configuration every point shares (bound to the dataset).
    pub base: RunConfig,
    /// The dataset every point replays.
    pub dataset: Arc<Dataset>,
    /// The points and their regions.
    pub plan: Plan,
    /// The sweep's directory (`--out`).
    pub out: PathBuf,
    /// The engine's metrics endpoints (`--engine-metrics`).
    pub engine: Vec<http::Uri>,
    /// Time between engine scrapes within a point.
    pub engine_interval: Duration,
    /// The proxies' records directories (`--wire`).
    pub wire: Vec<PathBuf>,
    /// SWE-bench accuracy per region, as given.
    pub swe_bench: Vec<(RegionName, f64)>,
    /// The minimum durations' scale.
    pub min_duration_scale: f64,
    /// The progress line, or none.
    pub progress: ProgressMode,
    /// `--shard` with `--barrier DIR`: the shards wait for each other before each point.
    pub barrier: Option<PathBuf>,
    /// `--submission DIR`, the loaded `--submitter` file and `--submission-replace`.
    pub submission: Option<SubmissionTarget>,
}

/// Where the sweep writes its submission tree, and how.
#[derive(Debug, Clone)]
pub struct SubmissionTarget {
    /// The tree's directory (`--submission`).
    pub dir: PathBuf,
    /// The loaded submitter file, if given.
    pub submitter: Option<tokentap_submission::Submitter>,
    /// Remove another sweep's points from the tree instead of refusing.
    pub replace: bool,
}

impl SubmissionTarget {
    /// Writes the tree of the sweep in `sweep_dir`.
    pub fn write(
        &self,
        sweep_dir: &Path,
    ) -> Result<tokentap_submission::Written, tokentap_submission::SubmissionError> {
        tokentap_submission::write(sweep_dir, &self.dir, self.submitter.as_ref(), self.replace)
    }
}

/// What a sweep produced.
#[derive(Debug, Clone)]
pub struct SweepOutcome {
    /// `sweep.json` as the sweep left it.
    pub file: SweepFile,
    /// The sweep was interrupted (Ctrl-C).
    pub interrupted: bool,
    /// Points run by this invocation (not skipped as already done).
    pub ran: Vec<u64>,
}

impl Sweep {
    /// From the command line: the plan, the base replay config, the dataset.
    pub async fn from_opts(opts: &Opts) -> anyhow::Result<Sweep> {
        let plan = plan(&opts.concurrency, opts.run.c_min, opts.c_max, opts.points)?;
        // The flags are checked first, as given; the points' shared options then resolve once.
        opts.run.resolve()?;
        let mut run = opts.run.clone();
        run.out = None;
        if let Some(r) = &plan.regions {
            run.c_min = Some(r.c_min);
        }
        let scale = opts.run.min_duration_scale.unwrap_or(1.0);
        if run.shard.count > 1 {
            // Each shard would extend a point on its own clock: a sharded point's length is
            // its --trajectories, and its tracked duration is judged against the minimum after
            // the merge (the point's own min_duration rule).
            let bad = |m: &str| Err(SweepError::Config(m.into()));
            if opts.run.min_duration_scale.is_some() {
                return bad("--min-duration-scale with --shard: the shards cannot extend a point together; give --trajectories (the merged point's duration is checked against the minimum)").map_err(Into::into);
            }
            if opts.run.trajectories.is_none() {
                return bad("a sharded sweep needs --trajectories T: every point issues T trajectories over all shards").map_err(Into::into);
            }
            if opts.barrier.is_none() {
                return bad("a sharded sweep needs --barrier DIR: a directory every shard can write (the shared volume), where the shards wait for each other before each point").map_err(Into::into);
            }
            run.min_duration_scale = None;
        } else {
            if opts.barrier.is_some() {
                return Err(SweepError::Config(
                    "--barrier is for a sharded sweep (--shard I/N)".into(),
                )
                .into());
            }
            run.min_duration_scale = Some(scale);
        }
        let mut base = run.resolve()?;
        let engine = opts
            .engine_metrics
            .iter()
            .map(|u| engine::parse_url(u))
            .collect::<Result<Vec<_>, _>>()
            .map_err(SweepError::Config)?;
        if opts.engine_interval.is_zero() {
            return Err(SweepError::Config("--engine-interval must be more than 0".into()).into());
        }
        let submission = match &opts.submission {
            Some(dir) => Some(SubmissionTarget {
                dir: dir.clone(),
                submitter: opts
                    .submitter
                    .as_deref()
                    .map(tokentap_submission::Submitter::load)
                    .transpose()?,
                replace: opts.submission_replace,
            }),
            None => None,
        };
        let (dataset, hash) = tokentap_replay::load_dataset(&opts.run.dataset_path).await?;
        tokentap_replay::models::discover(&mut base, &dataset).await?;
        base.bind_dataset(&dataset, Some(hash))?;
        Ok(Sweep {
            base,
            dataset: Arc::new(dataset),
            plan,
            out: opts
                .run
                .out
                .clone()
                .unwrap_or_else(|| PathBuf::from("tokentap-sweep")),
            engine,
            engine_interval: opts.engine_interval,
            wire: opts.wire.clone(),
            swe_bench: opts.swe_bench.clone(),
            min_duration_scale: scale,
            barrier: opts.barrier.clone(),
            submission,
            progress: if opts.run.quiet {
                ProgressMode::Off
            } else {
                ProgressMode::Line
            },
        })
    }

    /// The shared config as stored in `sweep.json` (what a resumed sweep must match).
    fn config_value(&self) -> serde_json::Value {
        compared_config(&self.base)
    }

    /// A fresh `sweep.json` for the plan, or the one in OUT merged with the plan (resume).
    fn open(&self) -> Result<SweepFile, SweepError> {
        let config = self.config_value();
        let gates = self.base.preset.map(|p| p.official().model.to_string());
        let fresh_point = |c: u64| {
            let region = self.plan.region_of(c);
            let mut cfg = self.base.clone();
            cfg.concurrency = c as usize;
            let min = cfg.min_duration().map_or(0.0, |d| d.as_secs_f64());
            Point::new(c, region, min)
        };
        if self.out.join(file::FILE).exists() {
            let mut f = SweepFile::load(&self.out)?;
            let differs = diff_keys(&f.config, &config);
            if !differs.is_empty() || f.regions != self.plan.regions {
                let mut fields = differs;
                if f.regions != self.plan.regions {
                    fields.push("regions (--c-min/--c-max)".into());
                }
                return Err(SweepError::Mismatch {
                    dir: self.out.clone(),
                    fields: fields.join(", "),
                });
            }
            for &c in &self.plan.concurrencies {
                if f.point_mut(c).is_none() {
                    f.points.push(fresh_point(c));
                }
            }
            f.points.sort_by_key(|p| p.concurrency);
            f.swe_bench = if self.swe_bench.is_empty() {
                f.swe_bench
            } else {
                self.swe_bench.clone()
            };
            if !self.wire.is_empty() {
                f.wire_dirs = self.wire.clone();
            }
            f.engine_metrics = self.engine.iter().map(|u| u.to_string()).collect();
            // A sweep written before ids gets its id now, kept from here on.
            f.sweep_id.get_or_insert_with(file::new_sweep_id);
            f.judge();
            return Ok(f);
        }
        // Point directories without the sweep.json that describes them: a deleted file, or a
        // directory of something else. Running would rename them aside as if interrupted.
        let orphans = point_dirs(&self.out);
        if !orphans.is_empty() {
            return Err(SweepError::Config(format!(
                "{} holds point directories ({}) but no {}: they are not a sweep tokentap can resume; move them away (or restore {}), or give another --out",
                self.out.display(),
                orphans.join(", "),
                file::FILE,
                file::FILE
            )));
        }
        let mut f = SweepFile {
            version: file::VERSION,
            sweep_id: Some(file::new_sweep_id()),
            tokentap_version: env!("CARGO_PKG_VERSION").to_string(),
            regions: self.plan.regions.clone(),
            regions_source: self.plan.regions_source.clone(),
            min_duration_scale: self.min_duration_scale,
            official: self.min_duration_scale == 1.0,
            gates,
            swe_bench: self.swe_bench.clone(),
            wire_dirs: self.wire.clone(),
            engine_metrics: self.engine.iter().map(|u| u.to_string()).collect(),
            points: self
                .plan
                .concurrencies
                .iter()
                .map(|&c| fresh_point(c))
                .collect(),
            verdict: pareto::verdict(None, None, &[], &[]),
            config,
        };
        f.judge();
        Ok(f)
    }
}

/// The part of the points' configuration a resumed sweep must share with the one that wrote
/// `sweep.json` (`base`: the points' settings; the concurrency is the point's own, the output
/// and metrics addresses this process's).
pub fn compared_config(base: &RunConfig) -> serde_json::Value {
    let mut v = serde_json::to_value(base).unwrap_or_default();
    if let Some(m) = v.as_object_mut() {
        for k in ["concurrency", "out", "metrics"] {
            m.remove(k);
        }
    }
    v
}

/// Top-level keys whose values differ.
fn diff_keys(a: &serde_json::Value, b: &serde_json::Value) -> Vec<String> {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return if a == b {
            vec![]
        } else {
            vec!["config".into()]
        };
    };
    let mut keys: Vec<String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// `tokentap sweep`: the exit code (0 valid curve, [`EXIT_NOT_VALID`] when it is not, 130 on
/// Ctrl-C).
pub async fn run(
    opts: Opts,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<i32> {
    let sweep = Sweep::from_opts(&opts).await?;
    println!(
        "tokentap sweep — {} → {}",
        sweep.base.endpoint_urls(),
        sweep.out.display()
    );
    println!("{}", sweep.plan.describe());
    if opts.plan {
        std::fs::create_dir_all(&sweep.out)
            .with_context(|| format!("creating {}", sweep.out.display()))?;
        let _lock = lock::acquire(&sweep.out)?;
        let f = sweep.open()?;
        f.save(&sweep.out)?;
        println!(
            "plan written to {} (nothing run)",
            sweep.out.join(file::FILE).display()
        );
        return Ok(0);
    }
    let out = sweep.out.clone();
    let submission = sweep.submission.clone();
    let outcome = run_with(sweep, shutdown).await?;
    println!("\n{}", report::terminal(&outcome.file));
    println!("report: {}", out.join("report.html").display());
    if let Some(target) = &submission {
        let w = target.write(&out)?;
        println!("{}", w.describe());
    }
    Ok(if outcome.interrupted {
        130
    } else if outcome.file.verdict.verdict == tokentap_mlperf::Verdict::Valid {
        0
    } else {
        EXIT_NOT_VALID
    })
}

/// Runs the sweep's points in order of concurrency, skipping points already done in OUT.
/// `sweep.json` is written before the first point and after each; each point's directory has
/// everything `tokentap replay --out` writes plus `point.json`. Stops cleanly when `shutdown`
/// resolves (the running point writes what it recorded and is marked interrupted).
pub async fn run_with(
    sweep: Sweep,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<SweepOutcome> {
    std::fs::create_dir_all(&sweep.out)
        .with_context(|| format!("creating {}", sweep.out.display()))?;
    // One sweep per directory, for as long as this one runs.
    let _lock = lock::acquire(&sweep.out)?;
    let mut f = sweep.open()?;
    f.save(&sweep.out)?;
    if let Some(t) = &sweep.submission {
        // Before any point runs: a tree holding another sweep's points is refused now, not
        // after the curve.
        tokentap_submission::preflight(&sweep.out, &t.dir, t.submitter.as_ref(), t.replace)?;
    }
    let stop = CancellationToken::new();
    let _stop_guard = stop.clone().drop_guard();
    {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = shutdown => stop.cancel(),
                _ = stop.cancelled() => {}
            }
        });
    }
    let todo: Vec<u64> = f
        .points
        .iter()
        .filter(|p| !p.done())
        .map(|p| p.concurrency)
        .collect();
    let skipped = f.points.len() - todo.len();
    if skipped > 0 && sweep.progress == ProgressMode::Line {
        eprintln!(
            "resuming: {skipped} points already done, {} to run",
            todo.len()
        );
    }
    let mut ran = Vec::new();
    let mut interrupted = false;
    for (i, &c) in todo.iter().enumerate() {
        if stop.is_cancelled() {
            interrupted = true;
            break;
        }
        let (point_interrupted, result) =
            point::run_point(&sweep, &mut f, c, i, todo.len(), &stop).await;
        ran.push(c);
        f.judge();
        f.save(&sweep.out)?;
        if let Err(e) = report::write_html(&sweep.out, &f) {
            tracing::warn!("sweep report not written: {e}");
        }
        result?;
        if let Some(target) = &sweep.submission {
            // As the sweep goes: a tree of the points done so far.
            match target.write(&sweep.out) {
                Ok(w) => {
                    for p in &w.replaced {
                        eprintln!(
                            "submission tree: removed (another sweep's, --submission-replace): {}",
                            p.display()
                        );
                    }
                }
                Err(e) => tracing::warn!("submission tree not written: {e}"),
            }
        }
        if sweep.progress == ProgressMode::Line && i + 1 < todo.len() {
            eprintln!("{}", report::terminal_table(&f));
        }
        if point_interrupted {
            interrupted = true;
            break;
        }
    }
    f.judge();
    f.save(&sweep.out)?;
    if let Err(e) = report::write_html(&sweep.out, &f) {
        tracing::warn!("sweep report not written: {e}");
    }
    Ok(SweepOutcome {
        file: f,
        interrupted,
        ran,
    })
}

/// Joins the proxies' records (`wire_dirs`: one proxy, or one beside each replica) to every
/// finished point of the sweep in `out` and rewrites `sweep.json` and the report: for a proxy
/// whose records were complete only after the sweep (the demo's, shut down at the end).
pub fn attach_wire(out: &Path, wire_dirs: &[PathBuf]) -> anyhow::Result<SweepFile> {
    let mut f = SweepFile::load(out)?;
    let recs = wire::load(wire_dirs)?;
    for p in f.points.iter_mut().filter(|p| p.done()) {
        let dir = out.join(&p.dir);
        p.wire = wire::view(p, &dir, &recs)?;
    }
    f.wire_dirs = wire_dirs.to_vec();
    f.save(out)?;
    report::write_html(out, &f)?;
    Ok(f)
}

/// `rC` directories (and their `.interrupted` copies) in `out`, sorted.
fn point_dirs(out: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(out)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| {
            n.strip_prefix('r').is_some_and(|rest| {
                let digits = rest.split('.').next().unwrap_or("");
                !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
            })
        })
        .collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opts::parse_swe;

    #[test]
    fn swe_values() {
        assert_eq!(
            parse_swe("ultra-low=0.9").unwrap(),
            (RegionName::LowLatency, 0.9)
        );
        assert!(parse_swe("mid=0.9").is_err());
        assert!(parse_swe("low=93").is_err());
        assert!(parse_swe("low").is_err());
    }
}
