//! `tokentap merge` of a sharded sweep: the N sweep directories of `tokentap sweep --shard I/N
//! --barrier DIR` (one per machine) joined point by point — each point's N run directories
//! through the replay's merge ([`tokentap_replay::merge`]: one window, exact percentiles from
//! the union, accuracy, validity), then `sweep.json`, the curve's verdict and the report of the
//! merged points.

use crate::file::{PointStatus, SweepFile};
use anyhow::Context as _;
use std::path::{Path, PathBuf};
use tokentap_replay::merge::MergeOpts;

/// Whether `dir` is a sweep directory.
pub fn is_sweep(dir: &Path) -> bool {
    dir.join(crate::file::FILE).is_file()
}

/// Joins the sweep directories of `opts.dirs` into `opts.out`. Returns the merged file.
pub fn merge(opts: &MergeOpts) -> anyhow::Result<SweepFile> {
    let files: Vec<SweepFile> = opts
        .dirs
        .iter()
        .map(|d| {
            SweepFile::load(d).with_context(|| format!("{} is not a sweep directory", d.display()))
        })
        .collect::<anyhow::Result<_>>()?;
    let first = &files[0];
    for (f, d) in files.iter().zip(&opts.dirs).skip(1) {
        let concurrencies =
            |f: &SweepFile| f.points.iter().map(|p| p.concurrency).collect::<Vec<_>>();
        if concurrencies(f) != concurrencies(first) {
            anyhow::bail!(
                "{} planned the points {:?} but {} planned {:?}: not shards of one sweep",
                opts.dirs[0].display(),
                concurrencies(first),
                d.display(),
                concurrencies(f)
            );
        }
    }
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("creating {}", opts.out.display()))?;
    let mut out = first.clone();
    // The merged curve is a sweep of its own: its tree is not any shard's.
    out.sweep_id = Some(crate::file::new_sweep_id());
    out.wire_dirs.clear();
    for p in out.points.iter_mut() {
        let not_done: Vec<String> = files
            .iter()
            .zip(&opts.dirs)
            .filter(|(f, _)| {
                !f.points
                    .iter()
                    .any(|q| q.concurrency == p.concurrency && q.done())
            })
            .map(|(_, d)| d.display().to_string())
            .collect();
        if !not_done.is_empty() && !opts.partial {
            p.status = PointStatus::Pending;
            p.primary = None;
            p.verdict = None;
            p.error = Some(format!("not done in {}", not_done.join(", ")));
            continue;
        }
        let dirs: Vec<PathBuf> = files
            .iter()
            .zip(&opts.dirs)
            .filter(|(f, _)| {
                f.points
                    .iter()
                    .any(|q| q.concurrency == p.concurrency && q.done())
            })
            .map(|(_, d)| d.join(&p.dir))
            .collect();
        let merged = tokentap_replay::merge::merge(&MergeOpts {
            dirs,
            out: opts.out.join(&p.dir),
            partial: opts.partial,
        })
        .with_context(|| format!("point {}", p.dir))?;
        let s = &merged.summary;
        let spans: Vec<(u64, u64)> = files
            .iter()
            .filter_map(|f| {
                let q = f.points.iter().find(|q| q.concurrency == p.concurrency)?;
                Some((q.started_wall_ns?, q.ended_wall_ns?))
            })
            .collect();
        p.started_wall_ns = spans.iter().map(|s| s.0).min();
        p.ended_wall_ns = spans.iter().map(|s| s.1).max();
        p.status = PointStatus::Done;
        p.take_numbers(s);
        // Every shard scraped the same engine over the point: the first shard's view.
        p.wire = None;
        p.error = None;
    }
    out.judge();
    out.save(&opts.out)?;
    crate::report::write_html(&opts.out, &out)?;
    Ok(out)
}

/// `tokentap merge` on sweep directories: prints the curve; exit 0 valid, 3 not valid.
pub fn run(opts: &MergeOpts) -> anyhow::Result<i32> {
    let f = merge(opts)?;
    println!(
        "merged {} shard sweeps into {}",
        opts.dirs.len(),
        opts.out.display()
    );
    println!("{}", crate::report::terminal(&f));
    Ok(if f.verdict.verdict == tokentap_mlperf::Verdict::Valid {
        0
    } else {
        crate::EXIT_NOT_VALID
    })
}
