//! `tokentap merge DIR... --out DIR`: the run directories of the N shards of one run (`replay
//! --shard I/N` on N machines) joined into the run one process would have written.
//!
//! ## What is joined, and how
//! - **Same run.** Every shard's `config.json` must be the same but for the shard index, the
//!   output directory, the metrics address and the local paths of the dataset and tokenizer
//!   (the dataset's hash must match); the shard count must be the same, every index present
//!   once. A difference is an error naming the key and both values; missing shards are named
//!   (`--partial` joins them anyway and the result says it is partial — never valid).
//! - **One timeline.** Each shard's monotonic instants are moved onto its wall clock by the
//!   offset between its two clocks at its start (`run.start`): intervals within a shard are
//!   unchanged, instants of different shards compare by their hosts' wall clocks. How far those
//!   clocks can disagree is bounded from the servers' `Date` headers the records carry
//!   ([`clock_bound`]) and reported.
//! - **One performance window**, the single-machine rule (docs/benchmark.md#window) applied to the
//!   union: tracking starts when the first shard starts; the budget is exhausted when the last
//!   shard claims its last trajectory; tracking stops at the first trajectory completion, on any
//!   shard, after that instant. A record is in the window when it was issued before the stop (the
//!   shard whose own window closed at that instant keeps its own flags, so one shard merged alone
//!   is exactly that shard's run).
//! - **Numbers recomputed from the union**: the records are folded again through the same
//!   aggregation as a live run (exact percentiles from all raw samples, counts, token totals,
//!   the reference's `result_summary.json` samples); accuracy is the mean of the records'
//!   unrounded scores with the per-turn rows of every shard's `scores.json`; validity is
//!   evaluated on the merged run. The HTML report is drawn from the merged files.

use crate::collector::Aggregate;
use crate::config::{RunConfig, Shard};
use crate::error::ReplayError;
use crate::progress::Counters;
use crate::summary::{MergeInfo, RunFacts, ShardClock, Summary, WarmupDeclaration};
use crate::RunOutcome;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tokentap_core::clock::Anchor;
use tokentap_core::linefile::{Batch, LineFile};
use tokentap_core::record::{Status, TurnRecord};
use tokentap_mlperf::scorer::{Domain, ExcludedTurn, ScoreSums, Scores, TurnScore};
use tokentap_run::files;

/// `tokentap merge` options.
#[derive(clap::Args, Clone, Debug)]
pub struct MergeOpts {
    /// The shards' run directories (each with config.json, summary.json, records.jsonl,
    /// scores.json — what `replay --shard I/N --out DIR` writes), or the shards' sweep
    /// directories (`sweep --shard I/N --barrier DIR --out DIR`).
    #[arg(required = true, num_args = 1.., value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Where the merged run is written (records.jsonl, summary.json, result_summary.json,
    /// scores.json, config.json, report.html).
    #[arg(long)]
    pub out: PathBuf,
    /// Join even when shards are missing (the result says so and is never valid).
    #[arg(long)]
    pub partial: bool,
}

impl ShardRun {
    /// This shard's clock against the servers'.
    fn clock(&self) -> ShardClock {
        let s = self;
        let (lo, hi, n) = clock_bound(s.records.iter().map(|l| &l.record));
        ShardClock {
            shard: s.config.shard.index,
            offset_lo_ms: lo.map(|v| v as f64 / 1e6),
            offset_hi_ms: hi.map(|v| v as f64 / 1e6),
            responses: n,
        }
    }
}

/// One shard as read from its directory.
struct ShardRun {
    dir: PathBuf,
    config: RunConfig,
    summary: Summary,
    records: Vec<Line>,
    scores: Value,
    /// `wall − mono` at the shard's start: adds to a monotonic instant to put it on the
    /// aligned timeline.
    delta: i128,
}

/// A line of `records.jsonl`.
#[derive(Deserialize, Serialize)]
struct Line {
    #[serde(flatten)]
    record: TurnRecord,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    accuracy: Option<f64>,
}

/// Joins `opts.dirs` into `opts.out`.
pub fn merge(opts: &MergeOpts) -> Result<RunOutcome, ReplayError> {
    let mut shards = opts
        .dirs
        .iter()
        .map(|d| load(d))
        .collect::<Result<Vec<_>, _>>()?;
    let (of, missing, config_hash) = check_same_run(&shards, opts.partial)?;
    shards.sort_by_key(|s| s.config.shard.index);
    let config = merged_config(&shards, &opts.out);
    align(&mut shards);
    let (start, end) = span(&shards);
    let window = union_window(&shards)?;
    refresh_in_window(&mut shards, &window);
    let clocks: Vec<ShardClock> = shards.iter().map(ShardRun::clock).collect();
    let skew_bound_ms = skew_bound(&clocks);

    // The records in the order a live run folds them: each shard's file is in its collector's
    // order (turns as they finished); the shards are interleaved by when their turns ended.
    let lines = interleave(
        shards
            .iter_mut()
            .map(|s| std::mem::take(&mut s.records))
            .collect(),
    );
    let counters = Counters::default();
    let mut agg = Aggregate::default();
    for l in &lines {
        agg.reference.window.fold(&l.record);
        agg.fold_turn(&l.record, &counters);
    }
    let scores = merge_scores(&shards, &lines)?;
    let facts = facts(&shards, &config, start, end, &window, scores);
    let mut built = crate::summary::build(agg, config.clone(), facts);
    let summary = &mut built.summary;
    summary.merge = Some(MergeInfo {
        shards: shards.len() as u64,
        of,
        missing: missing.clone(),
        dirs: shards.iter().map(|s| s.dir.display().to_string()).collect(),
        config_hash,
        clocks,
        skew_bound_ms,
        window_start_wall_ns: start,
        budget_exhausted_wall_ns: window.exhausted.map(|e| e.0),
        window_closed_wall_ns: window.close.as_ref().map(|c| c.at),
        window_closed_by: window.close.map(|c| c.by),
    });
    if !missing.is_empty() {
        summary.validity.verdict = tokentap_mlperf::Verdict::Invalid;
        summary.validity.reasons.insert(
            0,
            format!(
                "partial merge: shard(s) {} of {of} missing",
                missing
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    write(&opts.out, &lines, &config, &built)?;
    Ok(RunOutcome {
        summary: built.summary,
        out_dir: Some(opts.out.clone()),
        interrupted: false,
    })
}

/// The shared config, unsharded: the merged run is checked as one run. N processes of C slots
/// each had N·C conversations active at once.
fn merged_config(shards: &[ShardRun], out: &Path) -> RunConfig {
    let mut config = shards[0].config.clone();
    config.shard = Shard::default();
    config.concurrency = shards.iter().map(|s| s.config.concurrency).sum();
    config.out = Some(out.to_path_buf());
    config.metrics = None;
    config
}

/// A shard's monotonic instant on the aligned timeline.
fn at(s: &ShardRun, mono: u64) -> u64 {
    (mono as i128 + s.delta).max(0) as u64
}

/// Moves every record's instants onto the aligned timeline.
fn align(shards: &mut [ShardRun]) {
    for s in shards {
        let d = s.delta;
        for l in &mut s.records {
            let r = &mut l.record;
            r.start_mono_ns = (r.start_mono_ns as i128 + d).max(0) as u64;
            r.anchor.mono_ns = r.start_mono_ns;
            r.scheduled_mono_ns = r.scheduled_mono_ns.map(|t| (t as i128 + d).max(0) as u64);
        }
    }
}

/// The union's start (the first shard's) and end (the last shard's), aligned.
fn span(shards: &[ShardRun]) -> (u64, u64) {
    let start = shards
        .iter()
        .map(|s| at(s, s.summary.run.start.mono_ns))
        .min()
        .unwrap_or(0);
    let end = shards
        .iter()
        .map(|s| at(s, s.summary.run.end.mono_ns))
        .max()
        .unwrap_or(start);
    (start, end)
}

/// The union's window on the aligned timeline.
struct UnionWindow {
    /// When the last shard claimed its last trajectory, and which shard that was.
    exhausted: Option<(u64, usize)>,
    close: Option<Close>,
}

struct Close {
    at: u64,
    by: String,
    /// The shard whose own window closed at this instant (it keeps its own flags).
    own: Option<usize>,
}

/// The window rule (docs/benchmark.md#window) on the union: the budget is exhausted when the last
/// shard claims its last trajectory; tracking stops at the first trajectory completion on any shard
/// after that.
fn union_window(shards: &[ShardRun]) -> Result<UnionWindow, ReplayError> {
    let mut exhausted: Option<(u64, usize)> = None;
    for (i, s) in shards.iter().enumerate() {
        let Some(claim) = s.summary.window.last_claim_mono_ns else {
            return Err(ReplayError::Config(format!(
                "{}: summary.json has no window.last_claim_mono_ns (written by an older tokentap); run the shard again",
                s.dir.display()
            )));
        };
        let Some(t) = claim else {
            continue; // claimed nothing
        };
        let t = at(s, t);
        if exhausted.is_none_or(|(e, _)| t > e) {
            exhausted = Some((t, i));
        }
    }
    let Some((t_ex, last)) = exhausted else {
        return Ok(UnionWindow {
            exhausted,
            close: None,
        });
    };
    // The last shard to run out: its own window closed at its first completion after that.
    let mut close = shards[last].summary.window.closed_mono_ns.map(|c| Close {
        at: at(&shards[last], c),
        by: format!("shard {}", shards[last].config.shard.index),
        own: Some(last),
    });
    // Other shards: their trajectories that completed after t_ex.
    for (i, s) in shards.iter().enumerate() {
        if i == last {
            continue;
        }
        let first_after = completions(s)
            .into_iter()
            .filter(|&(_, c)| c >= t_ex)
            .min_by_key(|&(_, c)| c);
        if let Some((k, c)) = first_after {
            if close.as_ref().is_none_or(|best| c < best.at) {
                close = Some(Close {
                    at: c,
                    by: format!("shard {} (trajectory {k})", s.config.shard.index),
                    own: None,
                });
            }
        }
    }
    Ok(UnionWindow { exhausted, close })
}

/// Each trajectory's completion (its last sent turn's end), aligned: `(trajectory, instant)`.
fn completions(s: &ShardRun) -> BTreeMap<u64, u64> {
    let mut done: BTreeMap<u64, u64> = BTreeMap::new();
    for l in &s.records {
        let r = &l.record;
        if r.status == Status::Aborted {
            continue;
        }
        let (Some(k), Some(e)) = (r.trajectory, r.end_ns) else {
            continue;
        };
        let c = done.entry(k).or_default();
        *c = (*c).max(r.start_mono_ns + e);
    }
    done
}

/// `in_window` on the union: issued before the close (the shard that closed it keeps its own).
fn refresh_in_window(shards: &mut [ShardRun], w: &UnionWindow) {
    let close_at = w.close.as_ref().map(|c| c.at);
    let keep_own = w.close.as_ref().and_then(|c| c.own);
    for (i, s) in shards.iter_mut().enumerate() {
        if keep_own == Some(i) {
            continue;
        }
        for l in &mut s.records {
            let r = &mut l.record;
            r.in_window = Some(close_at.is_none_or(|c| r.start_mono_ns < c));
        }
    }
}

/// What the summary needs besides the folded records.
fn facts(
    shards: &[ShardRun],
    config: &RunConfig,
    start: u64,
    end: u64,
    w: &UnionWindow,
    scores: Scores,
) -> RunFacts {
    let sum = |f: &dyn Fn(&Summary) -> u64| shards.iter().map(|s| f(&s.summary)).sum();
    let stopped_by = shards.iter().find_map(|s| s.summary.run.stopped_by);
    let tokenizer = shards[0].summary.mlperf.tokenizer.as_ref().map(|dir| {
        (
            dir.clone(),
            sum(&|v| v.mlperf.template_fallbacks),
            shards
                .iter()
                .find_map(|s| s.summary.mlperf.template_error.clone()),
        )
    });
    RunFacts {
        start: Anchor {
            wall_ns: start,
            mono_ns: start,
        },
        end: Anchor {
            wall_ns: end,
            mono_ns: end,
        },
        interrupted: shards.iter().any(|s| s.summary.run.interrupted),
        stopped_by,
        window_closed: w.close.as_ref().map(|c| c.at),
        last_claim: w.exhausted.map(|e| e.0),
        budget_local: sum(&|v| v.run.trajectory_budget),
        trajectories_started: sum(&|v| v.run.trajectories_started),
        trajectories_finished: sum(&|v| v.run.trajectories_finished),
        scores,
        tokenizer,
        warmup: merge_warmups(shards),
        dataset_size: config
            .dataset
            .as_ref()
            .map_or(0, |d| d.conversations as u64),
        row_overrides: shards[0].summary.run.row_overrides.clone(),
    }
}

/// Writes the merged run: the same files as a run.
fn write(
    out: &Path,
    lines: &[Line],
    config: &RunConfig,
    built: &crate::summary::Built,
) -> Result<(), ReplayError> {
    std::fs::create_dir_all(out).map_err(|source| ReplayError::Io {
        what: "cannot create",
        path: out.to_path_buf(),
        source,
    })?;
    let io = |what: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| ReplayError::Io { what, path, source }
    };
    let rec_path = out.join(tokentap_run::files::RECORDS);
    {
        // Whole lines only (core's linefile): a failed write leaves no torn line, and the
        // merge fails naming the file.
        let mut f = LineFile::create(&rec_path).map_err(io("cannot create", &rec_path))?;
        let mut batch = Batch::with_capacity(256 << 10);
        for l in lines {
            batch
                .push(l)
                .map_err(|e| io("cannot write", &rec_path)(e.into()))?;
            if batch.bytes() >= 256 << 10 {
                f.write_batch(&mut batch)
                    .map_err(|(_, e)| io("cannot write", &rec_path)(e))?;
            }
        }
        f.write_batch(&mut batch)
            .map_err(|(_, e)| io("cannot write", &rec_path)(e))?;
    }
    crate::run::write_json(out, tokentap_run::files::CONFIG, config)?;
    crate::run::write_json(out, tokentap_run::files::SUMMARY, &built.summary)?;
    crate::run::write_text(
        out,
        tokentap_run::files::RESULT_SUMMARY,
        &built.result_summary.to_file_text(),
    )?;
    crate::run::write_text(
        out,
        tokentap_run::files::SCORES,
        &built.scores.to_file_text(),
    )?;
    if let Err(e) = tokentap_report::write_html(out) {
        tracing::warn!("report.html not written: {e}");
    }
    Ok(())
}

/// A k-way merge of the shards' record sequences by end instant, keeping each shard's order
/// (so one shard comes out exactly as it went in).
fn interleave(shards: Vec<Vec<Line>>) -> Vec<Line> {
    let end = |l: &Line| l.record.start_mono_ns + l.record.end_ns.unwrap_or(0);
    let total = shards.iter().map(Vec::len).sum();
    let mut iters: Vec<std::iter::Peekable<std::vec::IntoIter<Line>>> = shards
        .into_iter()
        .map(|v| v.into_iter().peekable())
        .collect();
    let mut out = Vec::with_capacity(total);
    loop {
        let next = iters
            .iter_mut()
            .enumerate()
            .filter_map(|(i, it)| it.peek().map(|l| (end(l), i)))
            .min();
        let Some((_, i)) = next else { break };
        out.extend(iters[i].next());
    }
    out
}

fn load(dir: &Path) -> Result<ShardRun, ReplayError> {
    let read = |name: &str| -> Result<Vec<u8>, ReplayError> {
        let p = dir.join(name);
        tokentap_core::jsonl::read_document(&p).map_err(|e| match e {
            tokentap_core::jsonl::DocumentError::Io(source) => ReplayError::Io {
                what: "cannot read (a shard's run directory has config.json, summary.json, records.jsonl and scores.json)",
                path: p,
                source,
            },
            e => ReplayError::Config(format!("{}: {e}", p.display())),
        })
    };
    // Each file into its type; the error names the file, the line and the field.
    fn typed<T: serde::de::DeserializeOwned>(
        path: &Path,
        what: &str,
        bytes: &[u8],
    ) -> Result<T, ReplayError> {
        serde_json::from_slice(bytes).map_err(|e| {
            ReplayError::Config(format!("{}:{}: not {what} ({e})", path.display(), e.line()))
        })
    }
    let config: RunConfig = typed(
        &dir.join(files::CONFIG),
        "a tokentap replay config",
        &read(files::CONFIG)?,
    )?;
    let summary: Summary = typed(
        &dir.join(files::SUMMARY),
        "a tokentap summary.json",
        &read(files::SUMMARY)?,
    )?;
    if let Some(e) = &summary.run.records_error {
        return Err(ReplayError::Config(format!(
            "{}: {} records of this shard were NOT written ({e}): its records.jsonl is incomplete; run the shard again",
            dir.display(),
            summary.run.records_failed
        )));
    }
    // The reference's schema (written by tokentap in its shape): read as JSON.
    let scores: Value = typed(&dir.join(files::SCORES), "JSON", &read(files::SCORES)?)?;
    let rec_path = dir.join(files::RECORDS);
    let f = std::fs::File::open(&rec_path).map_err(|source| ReplayError::Io {
        what: "cannot read",
        path: rec_path.clone(),
        source,
    })?;
    let mut records = Vec::new();
    let mut lines =
        tokentap_core::jsonl::Lines::new(std::io::BufReader::with_capacity(256 << 10, f));
    loop {
        let (n, line) = match lines.next_line() {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(tokentap_core::jsonl::LineError::Io(source)) => {
                return Err(ReplayError::Io {
                    what: "cannot read",
                    path: rec_path.clone(),
                    source,
                })
            }
            Err(e) => {
                return Err(ReplayError::Config(format!(
                    "{}:{}: {e}",
                    rec_path.display(),
                    lines.line()
                )))
            }
        };
        let l: Line = serde_json::from_str(line).map_err(|e| {
            ReplayError::Config(format!(
                "{}:{}: expected a tokentap turn record ({e})",
                rec_path.display(),
                n
            ))
        })?;
        records.push(l);
    }
    let (wall, mono) = (summary.run.start.wall_ns, summary.run.start.mono_ns);
    let end = summary.run.end.mono_ns;
    foreign_records(&rec_path, &records, mono, end, wall as i128 - mono as i128)?;
    Ok(ShardRun {
        dir: dir.to_path_buf(),
        config,
        summary,
        records,
        scores,
        delta: wall as i128 - mono as i128,
    })
}

/// Every record must be of the shard's own run: issued between the run's start and end
/// (`summary.json` `run.start`/`run.end`), on the same clocks (its anchor's wall − monotonic
/// offset within 5 s of the run's: another boot, or another host, differs by far more). A
/// `records.jsonl` copied from another run — even one with the same number of records — is
/// refused, naming its lines.
fn foreign_records(
    path: &Path,
    records: &[Line],
    start: u64,
    end: u64,
    delta: i128,
) -> Result<(), ReplayError> {
    const CLOCK_SLACK_NS: i128 = 5_000_000_000;
    let bad: Vec<String> = records
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let r = &l.record;
            let off = r.anchor.wall_ns as i128 - r.anchor.mono_ns as i128;
            let why = if (off - delta).abs() > CLOCK_SLACK_NS {
                format!(
                    "its clocks differ from the run's by {:.1} s",
                    (off - delta) as f64 / 1e9
                )
            } else if r.start_mono_ns < start {
                format!(
                    "it starts {:.1} s before the run's start",
                    (start - r.start_mono_ns) as f64 / 1e9
                )
            } else if r.start_mono_ns > end {
                format!(
                    "it starts {:.1} s after the run's end",
                    (r.start_mono_ns - end) as f64 / 1e9
                )
            } else {
                return None;
            };
            Some(format!("line {} ({why})", i + 1))
        })
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(ReplayError::Config(format!(
        "{}: {} record(s) are not of this shard's run (summary.json run.start/run.end): {}{} — a records.jsonl from another run?",
        path.display(),
        bad.len(),
        bad.iter().take(5).cloned().collect::<Vec<_>>().join(", "),
        if bad.len() > 5 { ", …" } else { "" }
    )))
}

/// The keys of `config.json` every shard must agree on: all but these — the shard, its output
/// directory and metrics address, what it learned of the model, and the tokenizer's local path
/// (the shards' hosts have their own). (`concurrency` is per process and must agree; the
/// merged run's is the sum.)
pub const PER_SHARD: [&str; 5] = ["shard", "out", "metrics", "model_discovered", "tokenizer"];

/// The shared part of a config, as JSON (local paths dropped, the dataset's hash kept): what
/// every shard of one run must agree on.
pub fn shared(c: &RunConfig) -> Value {
    let mut v = serde_json::to_value(c).unwrap_or_default();
    if let Value::Object(o) = &mut v {
        for k in PER_SHARD {
            o.remove(k);
        }
        if let Some(Value::Object(d)) = o.get_mut("dataset") {
            d.remove("path");
        }
    }
    v
}

/// Same run, every shard once: the shard count, missing indices and the shared config's hash.
fn check_same_run(
    shards: &[ShardRun],
    partial: bool,
) -> Result<(u64, Vec<u64>, String), ReplayError> {
    let bad = |m: String| Err(ReplayError::Config(m));
    let first = &shards[0];
    let n = first.config.shard.count;
    let base = shared(&first.config);
    let hash0 = first.config.dataset.as_ref().and_then(|d| d.hash.clone());
    let mut seen: BTreeMap<u64, &Path> = BTreeMap::new();
    for s in shards {
        let c = &s.config;
        if c.shard.count != n {
            return bad(format!(
                "{} is shard {}/{} but {} is shard {}/{}: shards of different runs",
                s.dir.display(),
                c.shard.index,
                c.shard.count,
                first.dir.display(),
                first.config.shard.index,
                n
            ));
        }
        let hash = c.dataset.as_ref().and_then(|d| d.hash.clone());
        if hash != hash0 {
            return bad(format!(
                "{} used another dataset than {} ({} vs {}): shards of different runs",
                s.dir.display(),
                first.dir.display(),
                hash.as_deref().unwrap_or("no hash"),
                hash0.as_deref().unwrap_or("no hash")
            ));
        }
        let v = shared(c);
        if v != base {
            let diffs = differences(&base, &v);
            return bad(format!(
                "{} and {} are not shards of one run; their configs differ in: {}",
                first.dir.display(),
                s.dir.display(),
                diffs.join("; ")
            ));
        }
        if let Some(other) = seen.insert(c.shard.index, &s.dir) {
            return bad(format!(
                "shard {}/{n} is given twice: {} and {}",
                c.shard.index,
                other.display(),
                s.dir.display()
            ));
        }
    }
    let missing: Vec<u64> = (0..n).filter(|i| !seen.contains_key(i)).collect();
    if !missing.is_empty() && !partial {
        return bad(format!(
            "missing shard(s): {} — the union of the given shards is not the run (give every shard's directory, or --partial to join what is there)",
            missing
                .iter()
                .map(|i| format!("{i}/{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    use blake2::Digest;
    let mut h = blake2::Blake2b::<blake2::digest::consts::U32>::new();
    h.update(serde_json::to_vec(&base).unwrap_or_default());
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((n, missing, format!("blake2b-256:{hex}")))
}

/// `key (a vs b)` for every top-level key whose values differ.
fn differences(a: &Value, b: &Value) -> Vec<String> {
    let (Value::Object(a), Value::Object(b)) = (a, b) else {
        return vec!["the whole config".into()];
    };
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| {
            let show = |v: Option<&Value>| v.map_or("absent".to_string(), Value::to_string);
            format!("{k} ({} vs {})", show(a.get(k)), show(b.get(k)))
        })
        .collect()
}

/// Bounds a host's clock offset against the servers' (local wall − server wall), ns, from the
/// records' `Date` headers: the server wrote its `Date` (a whole second `S`, the time in
/// `[S, S+1)`) after the request left and before the response head arrived, so
/// `send − (S+1) < offset ≤ head − S` for each response; the bound is the intersection.
/// Returns `(lo, hi, responses)`.
pub fn clock_bound<'a>(
    records: impl Iterator<Item = &'a TurnRecord>,
) -> (Option<i64>, Option<i64>, u64) {
    let (mut lo, mut hi, mut n) = (i64::MIN, i64::MAX, 0u64);
    for r in records {
        let (Some(s), Some(ttfb)) = (r.server_date_s, r.measured.ttfb_ns) else {
            continue;
        };
        let server = s as i64 * 1_000_000_000;
        let send = r.anchor.wall_ns as i64;
        let head = send + ttfb as i64;
        lo = lo.max(send - server - 1_000_000_000);
        hi = hi.min(head - server);
        n += 1;
    }
    if n == 0 {
        (None, None, 0)
    } else {
        (Some(lo), Some(hi), n)
    }
}

/// The largest wall-clock difference two shards' hosts can have, ms.
fn skew_bound(clocks: &[ShardClock]) -> Option<f64> {
    let mut worst = 0.0f64;
    for a in clocks {
        for b in clocks {
            let (Some(alo), Some(ahi), Some(blo), Some(bhi)) = (
                a.offset_lo_ms,
                a.offset_hi_ms,
                b.offset_lo_ms,
                b.offset_hi_ms,
            ) else {
                return None;
            };
            worst = worst.max((ahi - blo).abs()).max((alo - bhi).abs());
        }
    }
    Some(worst)
}

/// The union's `scores.json`: per-turn rows of every shard, the mean of the records'
/// unrounded scores.
fn merge_scores(shards: &[ShardRun], lines: &[Line]) -> Result<Scores, ReplayError> {
    let mut sums = ScoreSums::default();
    for l in lines {
        let Some(a) = l.accuracy else { continue };
        let conv = l
            .record
            .source_conversation_id
            .as_deref()
            .unwrap_or_default();
        sums.add(Domain::of(conv), a);
    }
    let n = sums.count();
    let mut per_turn = Vec::new();
    let (mut issued, mut observed) = (0u64, 0u64);
    for s in shards {
        let sc = &s.scores;
        issued += sc["turns"]["issued"].as_u64().unwrap_or(0);
        observed += sc["turns"]["observed"].as_u64().unwrap_or(0);
        for row in sc["per_turn"].as_array().into_iter().flatten() {
            let Value::Object(row) = row else { continue };
            let conv = row["conversation_id"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let key = (
                conv.clone(),
                row["repeat"].as_u64().unwrap_or(0) as u32,
                row["turn"].as_u64().unwrap_or(0) as u32,
            );
            per_turn.push(TurnScore {
                key,
                domain: Domain::of(&conv),
                score: row["score"].as_f64().unwrap_or(0.0),
                observed: row.get("missing").is_none(),
                row: row.clone(),
            });
        }
    }
    if per_turn.len() as u64 != n {
        return Err(ReplayError::Config(format!(
            "the shards' scores.json list {} scored turns but their records carry {n} scores: a shard's files do not belong together",
            per_turn.len()
        )));
    }
    per_turn.sort_by(|a, b| a.key.cmp(&b.key));
    let excluded = shards[0].scores["excluded_turns"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let conv = e["conversation_id"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            ExcludedTurn {
                domain: Domain::of(&conv),
                conversation_id: conv,
                turn: e["turn"].as_u64().unwrap_or(0) as u32,
            }
        })
        .collect();
    Ok(sums.into_scores(issued, observed, per_turn, excluded))
}

/// The shards' warmups declared as one: requests and trajectories summed, the longest
/// duration, the concurrency summed (they ran side by side).
fn merge_warmups(shards: &[ShardRun]) -> Option<WarmupDeclaration> {
    let all: Vec<WarmupDeclaration> = shards
        .iter()
        .filter_map(|s| s.summary.warmup.clone())
        .collect();
    let first = all.first()?.clone();
    Some(WarmupDeclaration {
        duration_s: all.iter().map(|w| w.duration_s).fold(0.0, f64::max),
        requests_issued: all.iter().map(|w| w.requests_issued).sum(),
        requests_completed: all.iter().map(|w| w.requests_completed).sum(),
        trajectories: all.iter().map(|w| w.trajectories).sum(),
        concurrency: all.iter().map(|w| w.concurrency).sum(),
        records: None,
        ..first
    })
}
