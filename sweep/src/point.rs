//! One measurement point: its replay (with the engine scraped over the measured phase), its
//! `point.json`, its entry in `sweep.json`, and the wire's view of it.

use crate::engine;
use crate::file::{PointStatus, SweepFile};
use crate::wire;
use crate::Sweep;
use anyhow::Context as _;
use std::path::Path;
use tokentap_mlperf::pareto::RegionName;
use tokentap_replay::{ProgressMode, RunConfig};
use tokio_util::sync::CancellationToken;

/// Runs one point; returns whether it was interrupted, and an error that must stop the sweep
/// (the point is already marked failed in `f`).
///
/// Invariant (the `expect`s below): `c` comes from `f.points` (`run_with` runs the points of
/// the file), so `f.point_mut(c)` finds it.
pub(crate) async fn run_point(
    sweep: &Sweep,
    f: &mut SweepFile,
    c: u64,
    i: usize,
    n: usize,
    stop: &CancellationToken,
) -> (bool, anyhow::Result<()>) {
    let dir = sweep.out.join(format!("r{c}"));
    let region = sweep
        .plan
        .region_of(c)
        .or(f.point_mut(c).and_then(|p| p.region));
    let cfg = point_config(sweep, c, &dir);
    let min_s = cfg.min_duration().map_or(0.0, |d| d.as_secs_f64());
    if sweep.progress == ProgressMode::Line {
        announce(c, i, n, region, min_s);
    }
    if let Err(e) = fresh_dir(sweep, c, &dir) {
        return (false, Err(e));
    }
    if let Some(b) = &sweep.barrier {
        match barrier(b, c, sweep.base.shard, sweep.progress, stop).await {
            Ok(true) => {}
            Ok(false) => return (true, Ok(())),
            Err(e) => return (false, Err(e)),
        }
    }
    let start = tokentap_core::clock::Anchor::now();
    mark_running(f, c, start.wall_ns, region, min_s);
    if let Err(e) = f.save(&sweep.out) {
        return (false, Err(e.into()));
    }
    let (outcome, engine_view) = replay_scraped(sweep, &cfg, c, &dir, stop).await;
    let end = tokentap_core::clock::Anchor::now();
    let p = f.point_mut(c).expect("the point is in the file");
    p.ended_wall_ns = Some(end.wall_ns);
    p.engine = engine_view;
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            p.status = PointStatus::Failed;
            p.error = Some(tokentap_core::error::report(e.as_ref()));
            return (false, Err(e.context(format!("point r{c}"))));
        }
    };
    let s = &outcome.summary;
    let records_lost = s.run.records_error.as_ref().map(|e| {
        format!(
            "{} records of concurrency {c} NOT written ({e}): the point is incomplete",
            s.run.records_failed
        )
    });
    p.status = point_status(s, records_lost.is_some(), outcome.interrupted);
    p.take_numbers(s);
    let meta = tokentap_run::sweep::PointFile {
        tokentap_version: env!("CARGO_PKG_VERSION").into(),
        concurrency: c,
        region,
        regions: sweep.plan.regions.clone(),
        status: p.status,
        start: Some(start),
        end: Some(end),
        official_length: sweep.min_duration_scale == 1.0,
        min_duration_s: min_s,
        warmup: s.warmup.clone(),
        engine_metrics: f.engine_metrics.clone(),
        config: cfg.clone(),
    };
    let status = meta.status;
    if let Err(e) = write_json(&dir.join(tokentap_run::files::POINT), &meta) {
        return (outcome.interrupted, Err(e));
    }
    if status == PointStatus::Failed {
        let why = first_failure(&dir, s);
        let msg = records_lost
            .unwrap_or_else(|| format!("no turn completed at concurrency {c}; first error: {why}"));
        f.point_mut(c).expect("the point is in the file").error = Some(msg.clone());
        return (false, Err(anyhow::anyhow!(msg)));
    }
    if !sweep.wire.is_empty() {
        attach_wire_view(sweep, f, c, &dir);
    }
    (outcome.interrupted, Ok(()))
}

/// Prints the point's heading: its place in the sweep, its region and how long it runs.
fn announce(c: u64, i: usize, n: usize, region: Option<RegionName>, min_s: f64) {
    eprintln!(
        "\n── point {}/{n}: concurrency {c} ({}), at least {} ──",
        i + 1,
        region.map_or("outside the regions", RegionName::as_str),
        if min_s > 0.0 {
            format!("{min_s:.0} s and one pass")
        } else {
            "one pass".into()
        }
    );
}

/// Marks point `c` running in the file, from `started_wall_ns`, with what it runs for.
fn mark_running(
    f: &mut SweepFile,
    c: u64,
    started_wall_ns: u64,
    region: Option<RegionName>,
    min_s: f64,
) {
    // Invariant: `c` is a point of the file (see `run_point`).
    let p = f.point_mut(c).expect("the point is in the file");
    p.status = PointStatus::Running;
    p.started_wall_ns = Some(started_wall_ns);
    p.ended_wall_ns = None;
    p.error = None;
    p.region = region;
    p.min_duration_s = min_s;
}

/// How a replayed point ended: failed when records were lost or no turn completed, else
/// interrupted or done.
fn point_status(
    s: &tokentap_replay::Summary,
    records_lost: bool,
    interrupted: bool,
) -> PointStatus {
    let ok = s.counts.turns.get("ok").copied().unwrap_or(0);
    if records_lost {
        PointStatus::Failed
    } else if interrupted {
        PointStatus::Interrupted
    } else if ok == 0 {
        // Nothing completed (a dead endpoint, a wrong model name): the next points would
        // only repeat it. The point's records say why; the first reason is named here.
        PointStatus::Failed
    } else {
        PointStatus::Done
    }
}

/// The first reason a point's turns failed: from its records, else its summary's errors.
fn first_failure(dir: &Path, s: &tokentap_replay::Summary) -> String {
    first_error(&dir.join(tokentap_run::files::RECORDS))
        .or_else(|| {
            let e = s.counts.errors.first()?;
            Some(format!("{}: {}", e.kind, e.first_message))
        })
        .unwrap_or_else(|| "no turn was issued".into())
}

/// Puts the wire's view (`--wire`) beside point `c`; a failure to read it is only a warning.
fn attach_wire_view(sweep: &Sweep, f: &mut SweepFile, c: u64, dir: &Path) {
    // Invariant: `c` is a point of the file (see `run_point`).
    let p = f.point_mut(c).expect("the point is in the file");
    match wire::load(&sweep.wire).and_then(|recs| wire::view(p, dir, &recs)) {
        Ok(v) => p.wire = v,
        Err(e) => tracing::warn!("--wire: {}", tokentap_core::error::report(e.as_ref())),
    }
}

/// The point's replay config: the sweep's, at concurrency `c` (its warmup too, unless
/// `--warmup-concurrency` was given), writing into `dir`.
fn point_config(sweep: &Sweep, c: u64, dir: &Path) -> RunConfig {
    let mut cfg = sweep.base.clone();
    cfg.concurrency = c as usize;
    cfg.out = Some(dir.to_path_buf());
    cfg
}

/// An empty `dir` for the point: a directory left by an interrupted or failed attempt is kept
/// beside (`rC.interrupted`, then `rC.interrupted.2`, …: an earlier copy is never replaced), not
/// mixed in.
fn fresh_dir(sweep: &Sweep, c: u64, dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        let old = (1..)
            .map(|n| {
                sweep.out.join(if n == 1 {
                    format!("r{c}.interrupted")
                } else {
                    format!("r{c}.interrupted.{n}")
                })
            })
            .find(|p| !p.exists())
            .expect("an unused name");
        std::fs::rename(dir, &old)
            .map_err(|e| anyhow::anyhow!("moving {} aside: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))
}

/// The point's replay, with the engine (`--engine-metrics`) scraped over its measured phase
/// only; a scraper failure is logged, not the point's.
async fn replay_scraped(
    sweep: &Sweep,
    cfg: &RunConfig,
    c: u64,
    dir: &Path,
    stop: &CancellationToken,
) -> (
    anyhow::Result<tokentap_replay::RunOutcome>,
    Option<engine::EngineView>,
) {
    let engine_stop = CancellationToken::new();
    let mut hooks = tokentap_replay::Hooks::default();
    let scraper = (!sweep.engine.is_empty()).then(|| {
        let (tx, rx) = tokio::sync::oneshot::channel();
        hooks.measured_start = Some(tx);
        tokio::spawn(engine::scrape_point(
            sweep.engine.clone(),
            sweep.engine_interval,
            rx,
            engine_stop.clone(),
            dir.to_path_buf(),
        ))
    });
    let outcome = tokentap_replay::run_with_hooks(
        cfg.clone(),
        sweep.dataset.clone(),
        sweep.progress,
        stop.clone().cancelled_owned(),
        hooks,
    )
    .await;
    engine_stop.cancel();
    let engine_view = match scraper {
        Some(h) => match h.await {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => {
                tracing::warn!("engine metrics of r{c}: {e}");
                None
            }
            Err(e) => {
                tracing::warn!("engine scraper of r{c}: {e}");
                None
            }
        },
        None => None,
    };
    (outcome, engine_view)
}

/// Leaves this shard's marker for point `c` in `dir` and waits until every shard's is there
/// (polled every 20 ms); `false` when stopped while waiting.
async fn barrier(
    dir: &Path,
    c: u64,
    shard: tokentap_replay::config::Shard,
    progress: ProgressMode,
    stop: &CancellationToken,
) -> anyhow::Result<bool> {
    let marker = |i: u64| dir.join(format!("r{c}.shard-{i}-of-{}", shard.count));
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("--barrier {}: {e}", dir.display()))?;
    std::fs::write(marker(shard.index), b"")
        .map_err(|e| anyhow::anyhow!("--barrier {}: {e}", dir.display()))?;
    let mut said = false;
    loop {
        let missing: Vec<u64> = (0..shard.count).filter(|&i| !marker(i).exists()).collect();
        if missing.is_empty() {
            return Ok(true);
        }
        if !said && progress == ProgressMode::Line {
            eprintln!(
                "point r{c}: waiting for shard(s) {} at {}",
                missing
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                dir.display()
            );
            said = true;
        }
        tokio::select! {
            _ = stop.cancelled() => return Ok(false),
            _ = tokio::time::sleep(std::time::Duration::from_millis(20)) => {}
        }
    }
}

/// The first failed turn's error in a records file, as `kind: message`.
fn first_error(records: &Path) -> Option<String> {
    let mut lines = tokentap_core::jsonl::open(records).ok()?;
    while let Ok(Some((_, l))) = lines.next_line() {
        let Ok(r) = serde_json::from_str::<tokentap_core::record::TurnRecord>(l) else {
            continue;
        };
        if let Some(e) = r
            .error
            .filter(|_| r.status != tokentap_core::record::Status::Aborted)
        {
            return Some(format!("{}: {}", e.kind, e.message));
        }
    }
    None
}

fn write_json(path: &Path, v: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(v).context("serializing")?;
    text.push('\n');
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
