//! # tokentap-replay — the MLPerf-exact closed-loop replay client
//!
//! Replays MLPerf Agentic Inference trajectories against an OpenAI-compatible endpoint exactly as
//! the benchmark defines them (SPEC §2–§6) and measures every streamed token of every turn.
//! `tokentap replay` is a thin wrapper over [`run`]; tests and the demo call [`run_with`] with a
//! dataset already in memory.
//!
//! ## Layout
//! - [`config`]: `Opts` (the flags) → [`ReplayConfig`] (presets, overrides, endpoint, dataset
//!   checks). Written to `config.json` and embedded in `summary.json`.
//! - [`body`]: byte-compatible request bodies built incrementally (each history message
//!   serialized once per trajectory; the body is a list of shared segments).
//! - [`salt`]: BLAKE2b-2 salt tags (SPEC §4).
//! - [`client`]: one HTTP/1.1 keep-alive connection per slot; one measured exchange per turn.
//! - [`driver`]: slots, the trajectory FIFO, delays, timeouts, performance window, stopping.
//! - [`accuracy`]: generated-text capture and inline accuracy (SPEC §6).
//! - [`collector`]: the single consumer of records (records.jsonl + aggregates).
//! - [`summary`]: `summary.json` and the terminal summary, with the validity verdict.
//! - [`progress`]: live counters and the status line.
//!
//! ## Data flow
//!
//! ```text
//!  Dataset ──► driver: C slots ──(claim k)──► BodyBuilder ──► client::exchange ──► Timeline
//!                 │                                              (stamp, frame, parse)
//!                 └──────── ReplayRecord (one per client turn) ──► collector ──► records.jsonl
//!                                                                     │
//!                                                     Aggregate ──► Summary ──► summary.json
//! ```
//!
//! ## Clocks
//! Every interval is on raw `CLOCK_MONOTONIC` ([`tokentap_core::clock`]); each record carries a
//! wall-clock anchor of its send instant. Delays and timeouts use tokio's timer; measurement
//! never does.
//!
//! ## Measured costs
//! See `benches/build.rs` (request build time vs context size) and `examples/replay_overhead.rs`
//! (client TTFT − the sim's first-chunk write time, turns/s, peak RSS); numbers are pasted
//! there and in the crate's report.
#![forbid(unsafe_code)]

pub mod accuracy;
pub mod body;
pub mod client;
pub mod collector;
pub mod config;
pub mod driver;
pub mod error;
pub mod metrics;
pub mod progress;
pub mod rx;
pub mod salt;
pub mod summary;

pub use collector::ReplayRecord;
pub use config::{Opts, Preset, ReplayConfig};
pub use driver::StopReason;
pub use error::ReplayError;
pub use progress::ProgressMode;
pub use summary::{Summary, Verdict};

use anyhow::Context as _;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokentap_core::clock::Anchor;
use tokentap_dataset::Dataset;
use tokio_util::sync::CancellationToken;

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub summary: Summary,
    /// Where records.jsonl, summary.json and config.json were written.
    pub out_dir: Option<PathBuf>,
    /// The shutdown future fired before the run ended.
    pub interrupted: bool,
}

/// Runs a replay until done or until `shutdown` resolves (then: stop issuing, cancel in-flight,
/// write everything recorded). Prints the summary to stdout.
pub async fn run(opts: Opts, shutdown: impl Future<Output = ()>) -> anyhow::Result<RunOutcome> {
    let mut config = ReplayConfig::from_opts(&opts)?;
    let path = opts.dataset.clone();
    let (dataset, hash) = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        let bytes = std::fs::read(&path).map_err(|source| ReplayError::Io {
            what: "cannot read the dataset",
            path: path.clone(),
            source,
        })?;
        let hash = file_hash(&bytes);
        let text = String::from_utf8(bytes)
            .map_err(|e| ReplayError::Config(format!("{}: not UTF-8: {e}", path.display())))?;
        let ds = Dataset::parse(&path, &text).map_err(ReplayError::Dataset)?;
        Ok((ds, hash))
    })
    .await
    .context("loading the dataset")??;
    config.bind_dataset(&dataset, Some(hash))?;
    let progress = if opts.quiet {
        ProgressMode::Off
    } else {
        ProgressMode::Line
    };
    let outcome = run_with(config, Arc::new(dataset), progress, shutdown).await?;
    print!("{}", outcome.summary.render_text());
    if let Some(d) = &outcome.out_dir {
        println!("records: {}", d.display());
    }
    Ok(outcome)
}

/// `blake2b-256:<hex>` of a file's bytes.
fn file_hash(bytes: &[u8]) -> String {
    use blake2::digest::{Update, VariableOutput};
    // Invariant: 32 is a valid BLAKE2b digest size and the buffer has that size.
    let mut h = blake2::Blake2bVar::new(32).expect("32 is a valid BLAKE2b digest size");
    h.update(bytes);
    let mut out = [0u8; 32];
    h.finalize_variable(&mut out)
        .expect("buffer has the digest size");
    let mut s = String::from("blake2b-256:");
    for b in out {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Runs a replay of an already-loaded dataset. Checks the config against the dataset first
/// (nothing is sent if that fails), writes `config.json` before the first request and
/// `records.jsonl` / `summary.json` at the end (also after `shutdown`).
pub async fn run_with(
    mut config: ReplayConfig,
    dataset: Arc<Dataset>,
    progress: ProgressMode,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<RunOutcome> {
    let hash = config.dataset.as_ref().and_then(|d| d.hash.clone());
    config.bind_dataset(&dataset, hash)?;
    let target = client::Target::resolve(
        &config.endpoint,
        &config.routing_headers,
        config.api_key.as_ref().map(|k| k.expose()),
    )
    .await?;
    let out_dir = config.out.clone();
    if let Some(dir) = &out_dir {
        write_config(dir, &config)?;
    }
    // Kernel receive timestamps on (and kept on) before the first request is sent.
    let _stamps = if config.kernel_rx_timestamps {
        Some(rx::KernelStamps::enable(std::time::Duration::from_secs(1)).await)
    } else {
        None
    };
    let counters = Arc::new(progress::Counters::default());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let records_path = out_dir.as_ref().map(|d| d.join("records.jsonl"));
    let collector = {
        let counters = counters.clone();
        tokio::task::spawn_blocking(move || {
            collector::collect(rx, records_path.as_deref(), counters)
        })
    };
    // `--metrics`: bound before the first turn so a scraper sees the whole run; stopped after
    // the summary is written.
    let metrics_stop = CancellationToken::new();
    // Stops the server on every way out of this function, errors included.
    let _metrics_guard = metrics_stop.clone().drop_guard();
    let client_metrics = match config.metrics {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("--metrics: cannot listen on {addr}"))?;
            let m = Arc::new(metrics::ClientMetrics::new());
            tracing::info!(
                "client metrics on http://{}/metrics",
                listener.local_addr().map_or(addr, |a| a)
            );
            tokio::spawn(metrics::serve(
                listener,
                m.clone(),
                counters.clone(),
                metrics_stop.clone(),
            ));
            Some(m)
        }
        None => None,
    };
    let start = Anchor::now();
    let mut driver_run = driver::Run::new(config.clone(), dataset, target, tx, counters.clone());
    driver_run.metrics = client_metrics;
    let run = Arc::new(driver_run);
    let printer_done = CancellationToken::new();
    let printer = (progress == ProgressMode::Line).then(|| {
        tokio::spawn(progress::print(
            counters.clone(),
            run.budget_local,
            start.mono_ns,
            printer_done.clone(),
        ))
    });

    let mut slots = tokio::task::JoinSet::new();
    for i in 0..config.concurrency {
        slots.spawn(driver::slot(run.clone(), i as u32));
    }
    let mut interrupted = false;
    let mut panicked = None;
    let max_duration = config.max_duration;
    let max_sleep = async move {
        match max_duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(max_sleep, shutdown);
    let mut max_fired = false;
    loop {
        tokio::select! {
            joined = slots.join_next() => match joined {
                None => break,
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    panicked.get_or_insert(e.to_string());
                    run.stop(StopReason::Shutdown);
                }
            },
            _ = &mut shutdown, if !interrupted => {
                interrupted = true;
                run.stop(StopReason::Shutdown);
                run.cancel.cancel();
            }
            _ = &mut max_sleep, if !max_fired => {
                max_fired = true;
                run.stop(StopReason::MaxDuration);
            }
        }
    }
    let facts_closed = run.window_closed_at();
    let stopped_by = run.stop_reason.get().copied();
    let budget_local = run.budget_local;
    // Dropping the last `Run` drops the sender: the collector drains and flushes.
    drop(run);
    let agg = collector
        .await
        .map_err(|e| ReplayError::Internal(format!("collector: {e}")))?;
    printer_done.cancel();
    if let Some(p) = printer {
        let _ = p.await;
    }
    let end = Anchor::now();
    let summary = summary::Summary::build(
        agg,
        config,
        summary::RunFacts {
            start,
            end,
            interrupted,
            stopped_by,
            window_closed: facts_closed,
            budget_local,
            trajectories_started: counters
                .trajectories_started
                .load(std::sync::atomic::Ordering::Relaxed),
            trajectories_finished: counters
                .trajectories_done
                .load(std::sync::atomic::Ordering::Relaxed),
        },
    );
    if let Some(dir) = &out_dir {
        write_json(dir, "summary.json", &summary)?;
        // The report is a view of the files just written; a failure to draw it must not fail
        // a run whose records are safe on disk, so it is logged, not returned.
        if let Err(e) = tokentap_report::write_html(dir) {
            tracing::warn!("report.html not written: {e}");
        }
    }
    if let Some(p) = panicked {
        return Err(ReplayError::Internal(format!("a replay slot panicked: {p}")).into());
    }
    Ok(RunOutcome {
        summary,
        out_dir,
        interrupted,
    })
}

fn write_config(dir: &Path, config: &ReplayConfig) -> Result<(), ReplayError> {
    std::fs::create_dir_all(dir).map_err(|source| ReplayError::Io {
        what: "cannot create the output directory",
        path: dir.to_path_buf(),
        source,
    })?;
    write_json(dir, "config.json", config)
}

fn write_json(dir: &Path, name: &str, v: &impl serde::Serialize) -> Result<(), ReplayError> {
    let path = dir.join(name);
    let mut text = serde_json::to_string_pretty(v)
        .map_err(|e| ReplayError::Internal(format!("serializing {name}: {e}")))?;
    text.push('\n');
    std::fs::write(&path, text).map_err(|source| ReplayError::Io {
        what: "cannot write",
        path,
        source,
    })
}
