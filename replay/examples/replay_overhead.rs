//! Client overhead and throughput of the replay client against the zero-delay sim.
//!
//! `latency`: for each concurrency, runs a closed loop of short conversations and reports, per
//! turn, client first-text-chunk arrival (`start_mono_ns + ttft_ns`: the kernel's receive
//! timestamp of the read that completed that chunk, see `replay/src/rx.rs`) minus the sim's own
//! stamp of when it handed that chunk to hyper. Both are CLOCK_MONOTONIC, so the difference is
//! exact: it is the sim's write path after its stamp plus loopback, plus whatever the client's
//! reading adds to the stamp (a read is stamped with its newest packet; until the first token
//! the client reads one HTTP chunk at a time, so that is its own packet). The `read` columns add
//! each turn's `rx_lag_ttft_ns`: the same difference had the client stamped in user space when
//! its thread read the bytes. Records and sim log are joined by session id + order
//! (docs/benchmark.md#client-formats). By default the sim runs as a separate process (this binary
//! re-executed as `serve-sim`, its log streamed to a JSONL file by the sim's own `chunk_log`): the
//! two share only the 2 cores. `--in-process` runs it inside this runtime instead.
//! `--flush-each-chunk` makes the sim write every chunk on its own, so its stamp is that chunk's
//! write (by default a zero-delay sim stamps up to ~15 ready chunks before hyper writes them in one
//! `writev`, and the difference includes the rest of that batch). `KEEP=1` copies records and sim
//! log to /tmp/lat{C}-*.jsonl.
//!
//! `full`: a 613-trajectory synthetic dataset (`tokentap_dataset::synth`, the official 113:500
//! mix) replayed once against the separate zero-delay sim: turns/s and this process's peak RSS
//! (VmHWM from /proc/self/status); `--depth-scale X` makes the trajectories X times deeper, for
//! the CPU per turn against the depth.
//!
//! `reference`: the MLPerf reference client (mlcommons/endpoints' `inference-endpoint`,
//! installed separately: `--reference PATH`) and this replay on the same synthetic dataset, against
//! the same sim child, one after the other with their order alternated each round, both counting
//! tokens with `--tokenizer`: each one's CPU per completed turn and the ratio. The reference runs
//! as its own process tree (a main process, a worker per HTTP connection group, a metrics
//! aggregator with a tokenizer pool, an event logger); its CPU is every process of that tree,
//! reaped through this binary re-executed as `cpu-of` (a child subreaper:
//! `getrusage(RUSAGE_CHILDREN)` once the last of them has exited). The replay's is this
//! process's own (`getrusage(RUSAGE_SELF)`) over `run_with`. Each round also runs both on one
//! trajectory alone: its CPU is a client's start-up (processes, tokenizer, dataset), reported
//! beside the per-turn cost with it taken out.
//!
//! Run (release):
//! ```text
//! cargo run --release -p tokentap-replay --example replay_overhead -- latency [--flush-each-chunk]
//! cargo run --release -p tokentap-replay --example replay_overhead -- full --concurrency 64
//! cargo run --release -p tokentap-replay --example replay_overhead -- reference \
//!     --reference /path/to/venv/bin/inference-endpoint \
//!     --tokenizer testdata/golden/mlperf-ea33275/tokenizer --concurrency 64
//! ```
//!
//! Results (the tables, the commands that produced them, the date and the machine):
//! docs/benchmarks.md, "Replay client overhead".

use clap::{Parser, Subcommand};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use tokentap_core::stats::Samples;
use tokentap_dataset::Dataset;
use tokentap_replay::{ProgressMode, RunOpts};
use tokentap_sim::{ChunkKind, RequestLog, SimConfig, SimServer};

#[derive(Parser)]
struct Cli {
    /// Run this process on a current_thread runtime instead of the multi-thread one the CLI
    /// uses (experiment: is a runtime per core better?).
    #[arg(long, global = true)]
    current_thread: bool,
    /// The sim writes every chunk on its own, so its stamp of a chunk is that chunk's write
    /// (zero-delay mode otherwise batches up to ~15 ready chunks per `writev` after stamping
    /// them, and the difference measured includes the rest of the batch).
    #[arg(long, global = true)]
    flush_each_chunk: bool,
    /// The reference tokenizer folder: `latency` runs every level twice, without and with it
    /// (same run), `full` counts with it, `reference` counts with it in both clients.
    #[arg(long, global = true)]
    tokenizer: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// TTFT overhead (client − sim first text chunk) at several concurrencies.
    Latency {
        #[arg(long, value_delimiter = ',', default_value = "1,64,512")]
        concurrency: Vec<usize>,
        /// Output tokens per turn (one per chunk).
        #[arg(long, default_value_t = 64)]
        tokens: u64,
        /// Turns measured per concurrency level (at least).
        #[arg(long, default_value_t = 4000)]
        turns: usize,
        #[arg(long)]
        in_process: bool,
        /// Sim decode time per token, a duration (0 = zero-delay sim). A small value keeps the
        /// machine below saturation, so the number is the receive path rather than CPU queueing.
        #[arg(long, default_value = "0", value_parser = tokentap_core::duration::parse)]
        decode: std::time::Duration,
    },
    /// http vs https (HTTP/1.1 and h2) through a tokentap proxy child (plain or TLS listener, the
    /// test certificates) in front of a sim child, same run: TTFT overhead against the sim's
    /// stamp, this process's CPU per turn, turns/s.
    Tls {
        #[arg(long, value_delimiter = ',', default_value = "1,64")]
        concurrency: Vec<usize>,
        #[arg(long, default_value_t = 64)]
        tokens: u64,
        #[arg(long, default_value_t = 2000)]
        turns: usize,
        /// The tokentap binary that runs the proxy (build it with `cargo build --release`).
        #[arg(long, default_value = "target/release/tokentap")]
        tokentap: PathBuf,
    },
    /// 613 synthetic trajectories: turns/s and peak RSS.
    Full {
        #[command(flatten)]
        load: SynthLoad,
        #[arg(long)]
        include_usage: bool,
    },
    /// The MLPerf reference client and this replay on the same synthetic dataset and sim, both
    /// counting tokens with `--tokenizer` (required): CPU per completed turn of each, the ratio.
    Reference {
        /// The reference's `inference-endpoint` executable (mlcommons/endpoints installed with
        /// `pip install -e`, e.g. a virtualenv's `bin/inference-endpoint`).
        #[arg(long, env = "MLPERF_REFERENCE", default_value = "inference-endpoint")]
        reference: PathBuf,
        #[command(flatten)]
        load: SynthLoad,
        /// The output cap both clients send (`max_new_tokens`, `max_completion_tokens`).
        #[arg(long, default_value_t = 4096)]
        max_tokens: u64,
        /// Rounds; the clients' order is reversed each round.
        #[arg(long, default_value_t = 1)]
        rounds: usize,
    },
    /// (internal) Run CMD (its output to LOG) as a child subreaper, reap every process of its
    /// tree, print `exit-code user-seconds system-seconds` of them all.
    CpuOf {
        log: PathBuf,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        cmd: Vec<String>,
    },
    /// (internal) Serve a zero-delay sim, print its URL, stream its log to FILE, stop on stdin EOF.
    ServeSim {
        log: PathBuf,
        #[arg(long, default_value_t = 64.0)]
        mean_tokens: f64,
        #[arg(long, default_value_t = 0.0)]
        sigma: f64,
        /// Decode time per token (a duration; 0 = zero-delay).
        #[arg(long, default_value = "0", value_parser = tokentap_core::duration::parse)]
        decode: std::time::Duration,
    },
}

/// The synthetic load of `full` and `reference`.
#[derive(clap::Args, Clone, Copy)]
struct SynthLoad {
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Synthetic size multiplier.
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Synthetic depth multiplier (turns per trajectory; on top of `--scale`).
    #[arg(long, default_value_t = 1.0)]
    depth_scale: f64,
    /// Sim output tokens per turn (mean, lognormal sigma 0.7); 400 ≈ MLPerf.
    #[arg(long, default_value_t = 400.0)]
    mean_tokens: f64,
}

static FLUSH_EACH_CHUNK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static TOKENIZER: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();

fn tokenizer() -> Option<PathBuf> {
    TOKENIZER.get().cloned().flatten()
}

/// CPU time of this process (all threads), s, from /proc/self/stat (utime + stime).
fn cpu_s() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = s.rsplit_once(')').map_or("", |x| x.1);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 of stat; `after` starts at field 3. Clock ticks are 100 Hz on Linux.
    (ticks(11) + ticks(12)) / 100.0
}

fn flush_each_chunk() -> bool {
    FLUSH_EACH_CHUNK.load(std::sync::atomic::Ordering::Relaxed)
}

fn sim_config(mean_tokens: f64, sigma: f64, decode_ms: f64) -> SimConfig {
    let mut c = SimConfig::zero_delay();
    c.timing.flush_each_chunk = flush_each_chunk();
    c.output.mean_tokens = mean_tokens;
    c.output.sigma = sigma;
    c.timing.decode_ms = decode_ms;
    c
}

/// The sim in a child process.
struct SimChild {
    child: Child,
    url: String,
    log: PathBuf,
}

impl SimChild {
    fn start(dir: &Path, mean_tokens: f64, sigma: f64, decode_ms: f64) -> anyhow::Result<SimChild> {
        let log = dir.join("sim-log.jsonl");
        let mut child = Command::new(std::env::current_exe()?)
            .args(["serve-sim", &log.to_string_lossy()])
            .args([
                "--mean-tokens",
                &mean_tokens.to_string(),
                "--sigma",
                &sigma.to_string(),
            ])
            .args(["--decode", &format!("{decode_ms}ms")])
            .args(flush_each_chunk().then_some("--flush-each-chunk"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let out = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let mut line = String::new();
        std::io::BufReader::new(out).read_line(&mut line)?;
        let url = line.trim().to_string();
        anyhow::ensure!(url.starts_with("http://"), "sim child said {line:?}");
        Ok(SimChild { child, url, log })
    }

    /// Stops the child (stdin EOF → graceful shutdown) and reads its log.
    fn finish(mut self) -> anyhow::Result<Vec<RequestLog>> {
        drop(self.child.stdin.take());
        self.child.wait()?;
        let text = std::fs::read_to_string(&self.log)?;
        text.lines()
            .map(|l| serde_json::from_str(l).map_err(Into::into))
            .collect()
    }
}

async fn serve_sim(
    log: PathBuf,
    mean_tokens: f64,
    sigma: f64,
    decode_ms: f64,
) -> anyhow::Result<()> {
    let mut c = sim_config(mean_tokens, sigma, decode_ms);
    c.chunk_log = Some(log);
    let sim = SimServer::start(c).await?;
    println!("{}", sim.base_url());
    std::io::stdout().flush()?;
    tokio::task::spawn_blocking(|| {
        let mut s = String::new();
        while std::io::stdin()
            .read_line(&mut s)
            .map(|n| n > 0)
            .unwrap_or(false)
        {}
    })
    .await?;
    sim.shutdown().await;
    Ok(())
}

/// `n` conversations of `turns` user turns each.
fn closed_loop_dataset(n: usize, turns: usize) -> Dataset {
    let mut s = String::new();
    for c in 0..n {
        for t in 0..turns {
            s.push_str(&format!(
                "{{\"conversation_id\":\"c{c:05}\",\"turn\":{},\"role\":\"user\",\"content\":\"question {t} of conversation {c}\"}}\n",
                2 * t + 1
            ));
            s.push_str(&format!(
                "{{\"conversation_id\":\"c{c:05}\",\"turn\":{},\"role\":\"assistant\",\"content\":\"answer {t}\"}}\n",
                2 * t + 2
            ));
        }
    }
    // Invariant: the rows above follow every rule of docs/benchmark.md#dataset.
    Dataset::parse("closed-loop.jsonl", &s).expect("generated dataset is valid")
}

fn temp_dir(name: &str) -> anyhow::Result<PathBuf> {
    Ok(tokentap_testkit::data::temp_dir(&format!(
        "overhead-{name}"
    )))
}

fn read_records(dir: &Path) -> anyhow::Result<Vec<Value>> {
    std::fs::read_to_string(dir.join("records.jsonl"))?
        .lines()
        .map(|l| serde_json::from_str(l).map_err(Into::into))
        .collect()
}

fn first_text(log: &RequestLog) -> Option<u64> {
    log.chunks
        .iter()
        .find(|c| {
            matches!(
                c.kind,
                ChunkKind::Reasoning | ChunkKind::Content | ChunkKind::ToolCall
            )
        })
        .map(|c| c.mono_ns)
}

/// Client first-text arrival − sim first-text write, ns, joined by session + order: as the
/// client records it (kernel receive stamp), and as its thread saw it (+ `rx_lag_ttft_ns`).
fn join(records: &[Value], log: &[RequestLog]) -> (Samples, Samples) {
    let mut sim: HashMap<&str, Vec<(u64, Option<u64>)>> = HashMap::new();
    for l in log {
        if let Some(s) = &l.session {
            sim.entry(s).or_default().push((l.seq, first_text(l)));
        }
    }
    for v in sim.values_mut() {
        v.sort();
    }
    type Ours = (u64, Option<u64>, u64);
    let mut ours: HashMap<&str, Vec<Ours>> = HashMap::new();
    for r in records {
        if r["status"] != "ok" {
            continue;
        }
        let (Some(id), Some(start)) = (r["conversation_id"].as_str(), r["start_mono_ns"].as_u64())
        else {
            continue;
        };
        ours.entry(id).or_default().push((
            start,
            r["ttft_ns"].as_u64().map(|t| start + t),
            r["rx_lag_ttft_ns"].as_u64().unwrap_or(0),
        ));
    }
    let (mut out, mut user) = (Samples::new(), Samples::new());
    for (id, mut v) in ours {
        v.sort();
        let Some(s) = sim.get(id) else { continue };
        for ((_, client, lag), (_, server)) in v.iter().zip(s) {
            if let (Some(c), Some(s)) = (client, server) {
                out.push(*c as f64 - *s as f64);
                user.push((*c + *lag) as f64 - *s as f64);
            }
        }
    }
    (out, user)
}

fn status_kb(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn vm_hwm_kb() -> Option<u64> {
    status_kb("VmHWM:")
}

async fn latency(
    levels: Vec<usize>,
    tokens: u64,
    turns: usize,
    in_process: bool,
    decode_ms: f64,
) -> anyhow::Result<()> {
    println!(
        "TTFT overhead = client first-text arrival − sim first-text write, {tokens} tokens/turn, decode {decode_ms} ms/token, sim {}{}",
        if in_process { "in-process" } else { "separate process" },
        if flush_each_chunk() { ", one write per chunk" } else { "" }
    );
    println!(
        "{:>6} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}   {:>13} {:>13}",
        "conc",
        "turns",
        "p50 µs",
        "p90 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
        "turns/s",
        "read p50 µs",
        "read p99 µs"
    );
    let variants: Vec<Option<PathBuf>> = match tokenizer() {
        Some(t) => vec![None, Some(t)],
        None => vec![None],
    };
    for c in levels {
        for tok in &variants {
            let dir = temp_dir(&format!("lat{c}"))?;
            let per_conv = 4;
            let n = (turns / per_conv).max(c * 2);
            let ds = Arc::new(closed_loop_dataset(n, per_conv));
            let (url, child, sim) = if in_process {
                let sim = SimServer::start(sim_config(tokens as f64, 0.0, decode_ms)).await?;
                (sim.base_url(), None, Some(sim))
            } else {
                let ch = SimChild::start(&dir, tokens as f64, 0.0, decode_ms)?;
                (ch.url.clone(), Some(ch), None)
            };
            let mut cfg = RunOpts::new(&url)?;
            cfg.model = Some("m".into());
            cfg.concurrency = c;
            cfg.sampling.max_completion_tokens = Some(tokens);
            cfg.out = Some(dir.clone());
            cfg.tokenizer = tok.clone();
            let cpu0 = cpu_s();
            let out = tokentap_replay::run_with(
                cfg.resolve().unwrap(),
                ds,
                ProgressMode::Off,
                std::future::pending(),
            )
            .await?;
            let cpu = cpu_s() - cpu0;
            let log = match (child, &sim) {
                (Some(ch), _) => ch.finish()?,
                (None, Some(s)) => s.log(),
                _ => unreachable!(),
            };
            let recs = read_records(&dir)?;
            let not_ok = recs.iter().filter(|r| r["status"] != "ok").count();
            let retried = recs.iter().filter(|r| r.get("retries").is_some()).count();
            if not_ok + retried > 0 {
                println!("  ({not_ok} turns not ok, {retried} retried)");
            }
            if std::env::var_os("KEEP").is_some() {
                std::fs::copy(
                    dir.join("records.jsonl"),
                    format!("/tmp/lat{c}-records.jsonl"),
                )?;
                let sim_log: Vec<String> = log
                    .iter()
                    .map(|l| serde_json::to_string(l).unwrap_or_default())
                    .collect();
                std::fs::write(format!("/tmp/lat{c}-sim.jsonl"), sim_log.join("\n"))?;
            }
            let (mut d, mut user) = join(&recs, &log);
            let p = d
                .percentiles()
                .ok_or_else(|| anyhow::anyhow!("no joined samples"))?;
            let pu = user
                .percentiles()
                .ok_or_else(|| anyhow::anyhow!("no joined samples"))?;
            println!(
            "{:>6} {:>7} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.0}   {:>13.1} {:>13.1}   {}, client CPU {:.0} µs/turn",
            c,
            p.count,
            p.p50 / 1e3,
            p.p90 / 1e3,
            p.p99 / 1e3,
            p.p999 / 1e3,
            p.max / 1e3,
            out.summary.throughput.turns_per_s.unwrap_or(0.0),
            pu.p50 / 1e3,
            pu.p99 / 1e3,
            if tok.is_some() { "--tokenizer" } else { "no tokenizer" },
            cpu / recs.len().max(1) as f64 * 1e6,
        );
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    Ok(())
}

/// A `tokentap proxy` child process in front of `upstream`.
struct ProxyChild {
    child: Child,
    url: String,
}

impl ProxyChild {
    fn start(bin: &Path, upstream: &str, tls: bool) -> anyhow::Result<ProxyChild> {
        let certs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../proxy/tests/certs");
        let mut cmd = Command::new(bin);
        cmd.args(["proxy", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
            .args(["--upstream", upstream]);
        if tls {
            cmd.arg("--tls-cert")
                .arg(certs.join("server.pem"))
                .arg("--tls-key")
                .arg(certs.join("server.key"));
        }
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn()?;
        let out = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let mut lines = std::io::BufReader::new(out).lines();
        let url = tokentap_testkit::spawn::try_announced(&mut lines, "listening on ")
            .map_err(anyhow::Error::msg)?
            .replace("127.0.0.1", if tls { "localhost" } else { "127.0.0.1" });
        // Keep reading its stdout to the end.
        std::thread::spawn(move || lines.for_each(drop));
        Ok(ProxyChild { child, url })
    }
}

impl Drop for ProxyChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn tls(levels: Vec<usize>, tokens: u64, turns: usize, bin: PathBuf) -> anyhow::Result<()> {
    anyhow::ensure!(
        bin.is_file(),
        "{}: build it first (cargo build --release)",
        bin.display()
    );
    let ca = Path::new(env!("CARGO_MANIFEST_DIR")).join("../proxy/tests/certs/ca.pem");
    println!(
        "replay → tokentap proxy (child) → zero-delay sim (child), {tokens} tokens/turn; TTFT overhead = client first-text arrival − sim first-text write (the proxy hop is in every row)"
    );
    println!(
        "{:>6} {:<16} {:>7} {:>9} {:>9} {:>9} {:>9} {:>14}",
        "conc", "path", "turns", "p50 µs", "p90 µs", "p99 µs", "turns/s", "client CPU/turn"
    );
    for c in levels {
        for (label, tls, h2) in [
            ("http/1.1", false, false),
            ("https http/1.1", true, false),
            ("https h2", true, true),
        ] {
            let dir = temp_dir(&format!("tls{c}"))?;
            let per_conv = 4;
            let n = (turns / per_conv).max(c * 2);
            let ds = Arc::new(closed_loop_dataset(n, per_conv));
            let sim = SimChild::start(&dir, tokens as f64, 0.0, 0.0)?;
            let proxy = ProxyChild::start(&bin, &sim.url, tls)?;
            let mut cfg = RunOpts::new(&proxy.url)?;
            cfg.model = Some("m".into());
            cfg.concurrency = c;
            cfg.sampling.max_completion_tokens = Some(tokens);
            cfg.out = Some(dir.clone());
            cfg.ca = Some(ca.clone());
            (cfg.http1, cfg.http2) = (!h2, h2);
            let cpu0 = cpu_s();
            let out = tokentap_replay::run_with(
                cfg.resolve().unwrap(),
                ds,
                ProgressMode::Off,
                std::future::pending(),
            )
            .await?;
            let cpu = cpu_s() - cpu0;
            drop(proxy);
            let log = sim.finish()?;
            let recs = read_records(&dir)?;
            let not_ok = recs.iter().filter(|r| r["status"] != "ok").count();
            if not_ok > 0 {
                let mut kinds: HashMap<String, usize> = HashMap::new();
                for r in recs.iter().filter(|r| r["status"] != "ok") {
                    *kinds
                        .entry(format!("{} {}", r["status"], r["error"]["message"]))
                        .or_default() += 1;
                }
                anyhow::bail!("{label} at {c}: {not_ok} turns not ok: {kinds:?}");
            }
            let (mut d, _) = join(&recs, &log);
            let p = d
                .percentiles()
                .ok_or_else(|| anyhow::anyhow!("no joined samples"))?;
            println!(
                "{:>6} {:<16} {:>7} {:>9.1} {:>9.1} {:>9.1} {:>9.0} {:>11.0} µs",
                c,
                label,
                p.count,
                p.p50 / 1e3,
                p.p90 / 1e3,
                p.p99 / 1e3,
                out.summary.throughput.turns_per_s.unwrap_or(0.0),
                cpu / recs.len().max(1) as f64 * 1e6,
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    Ok(())
}

async fn full(load: SynthLoad, include_usage: bool) -> anyhow::Result<()> {
    let SynthLoad {
        concurrency,
        scale,
        depth_scale,
        mean_tokens,
    } = load;
    let dir = temp_dir("full")?;
    let (path, _) = write_synth(&dir, scale, depth_scale)?;
    let hwm_before = vm_hwm_kb();
    let ds = Arc::new(Dataset::load(&path).map_err(|e| anyhow::anyhow!("{e}"))?);
    let hwm_loaded = vm_hwm_kb();
    println!(
        "dataset loaded: VmRSS {} MB",
        status_kb("VmRSS:").map_or(0, |k| k / 1024)
    );
    let ch = SimChild::start(&dir, mean_tokens, 0.7, 0.0)?;
    let mut cfg = RunOpts::new(&ch.url)?;
    cfg.model = Some("m".into());
    cfg.concurrency = concurrency;
    cfg.include_usage = include_usage;
    cfg.salt = true;
    cfg.out = Some(dir.join("out"));
    cfg.tokenizer = tokenizer();
    let t0 = tokio::time::Instant::now();
    let cpu0 = cpu_s();
    let out = tokentap_replay::run_with(
        cfg.resolve().unwrap(),
        ds,
        ProgressMode::Line,
        std::future::pending(),
    )
    .await?;
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_s() - cpu0;
    // Before this process reads the sim's log (millions of chunk entries) for the join.
    let hwm_run = vm_hwm_kb();
    let rss_run = status_kb("VmRSS:");
    let log = ch.finish()?;
    let sm = &out.summary;
    let chunks: usize = log.iter().map(|l| l.chunks.len()).sum();
    println!(
        "concurrency {concurrency}: {} ok turns in {wall:.1} s = {:.0} turns/s, {:.0} chunks/s, window turns/s {:.0}, output tok/s {:.0}",
        sm.counts.turns["ok"],
        sm.counts.turns["ok"] as f64 / wall,
        chunks as f64 / wall,
        sm.throughput.turns_per_s.unwrap_or(0.0),
        sm.throughput.output_tokens_per_s.unwrap_or(0.0),
    );
    println!(
        "replay process CPU: {cpu:.1} s = {:.0} µs per turn ({})",
        cpu / sm.counts.total.max(1) as f64 * 1e6,
        if tokenizer().is_some() {
            "with --tokenizer"
        } else {
            "no tokenizer"
        }
    );
    println!(
        "peak RSS (VmHWM) of the replay process: before load {} MB, after load {} MB, after the run {} MB (VmRSS after the run {} MB)",
        hwm_before.map_or(0, |k| k / 1024),
        hwm_loaded.map_or(0, |k| k / 1024),
        hwm_run.map_or(0, |k| k / 1024),
        rss_run.map_or(0, |k| k / 1024),
    );
    let (mut d, _) = join(&read_records(&dir.join("out"))?, &log);
    if let Some(p) = d.percentiles() {
        println!(
            "TTFT overhead: p50 {:.1} µs, p99 {:.1} µs over {} turns",
            p.p50 / 1e3,
            p.p99 / 1e3,
            p.count
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// CPU time of this process (all threads), s, from `getrusage(RUSAGE_SELF)`.
fn self_cpu_s() -> anyhow::Result<f64> {
    use nix::sys::resource::{getrusage, UsageWho};
    let ru = getrusage(UsageWho::RUSAGE_SELF)?;
    Ok(tv_s(ru.user_time()) + tv_s(ru.system_time()))
}

fn tv_s(t: nix::sys::time::TimeVal) -> f64 {
    t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6
}

/// `cpu-of`: runs `cmd`, then reaps every process of its tree (orphans are reparented to this
/// subreaper), so `RUSAGE_CHILDREN` holds all of their CPU.
fn cpu_of(log: &Path, cmd: &[String]) -> anyhow::Result<()> {
    use nix::errno::Errno;
    use nix::sys::resource::{getrusage, UsageWho};
    nix::sys::prctl::set_child_subreaper(true)?;
    let out = std::fs::File::create(log)?;
    let status = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .status()
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot run {}: {e} (the reference client: docs/benchmarks.md, \"Beside the reference client\")",
                cmd[0]
            )
        })?;
    loop {
        match nix::sys::wait::wait() {
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(Errno::ECHILD) => break,
            Err(e) => return Err(e.into()),
        }
    }
    let ru = getrusage(UsageWho::RUSAGE_CHILDREN)?;
    println!(
        "{} {:.6} {:.6}",
        status.code().unwrap_or(-1),
        tv_s(ru.user_time()),
        tv_s(ru.system_time())
    );
    Ok(())
}

/// One client's run in `reference`: completed turns and CPU seconds.
struct ClientCost {
    turns: u64,
    cpu_s: f64,
}

/// The synthetic dataset of `full` and `reference`, written to `dir`: its path and its number
/// of trajectories.
fn write_synth(dir: &Path, scale: f64, depth_scale: f64) -> anyhow::Result<(PathBuf, u64)> {
    let path = dir.join("synth.jsonl");
    let cfg = tokentap_dataset::synth::SynthConfig {
        scale,
        depth_scale,
        ..Default::default()
    };
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
    let s = tokentap_dataset::synth::synth(&cfg, &mut f)?;
    f.flush()?;
    println!(
        "dataset: {} trajectories, {} client turns ({:.1} per trajectory), {:.1} MB",
        s.trajectories,
        s.client_turns,
        s.client_turns as f64 / s.trajectories.max(1) as f64,
        s.bytes as f64 / 1e6
    );
    Ok((path, s.trajectories))
}

/// Parameters both clients of `reference` run with.
struct Equal<'a> {
    url: &'a str,
    dataset: &'a Path,
    tokenizer: &'a Path,
    concurrency: usize,
    max_tokens: u64,
    /// Trajectories to issue, each once: the dataset's number or fewer (the first n).
    trajectories: u64,
}

/// This replay, in this process: salted, temperature 0, the output cap, counting with the
/// tokenizer, the tokenizer's folder as the model name (as the reference sends it).
async fn replay_cost(e: &Equal<'_>, out: PathBuf) -> anyhow::Result<ClientCost> {
    let mut cfg = RunOpts::new(e.url)?;
    cfg.model = Some(e.tokenizer.to_string_lossy().into_owned());
    cfg.concurrency = e.concurrency;
    cfg.salt = true;
    cfg.trajectories = Some(e.trajectories);
    cfg.sampling.temperature = Some(0.0);
    cfg.sampling.max_completion_tokens = Some(e.max_tokens);
    cfg.dataset_path = e.dataset.to_path_buf();
    cfg.out = Some(out);
    cfg.tokenizer = Some(e.tokenizer.to_path_buf());
    cfg.quiet = true;
    let cpu0 = self_cpu_s()?;
    // The dataset is loaded inside the measured span, as the reference loads its own.
    let ds = Arc::new(Dataset::load(e.dataset).map_err(|x| anyhow::anyhow!("{x}"))?);
    let run = tokentap_replay::run_with(
        cfg.resolve().map_err(|x| anyhow::anyhow!("{x}"))?,
        ds,
        ProgressMode::Off,
        std::future::pending(),
    )
    .await?;
    let cpu_s = self_cpu_s()? - cpu0;
    Ok(ClientCost {
        turns: run.summary.counts.turns.get("ok").copied().unwrap_or(0),
        cpu_s,
    })
}

/// The reference client on the same inputs, offline, in `dir`: its config (salted, no tool
/// delays, inline accuracy as an official run scores it, every chunk streamed), its run under
/// `cpu-of`, its completed turns from its `events.jsonl`.
fn reference_cost(reference: &Path, e: &Equal<'_>, dir: &Path) -> anyhow::Result<ClientCost> {
    std::fs::create_dir_all(dir)?;
    let q = |p: &Path| serde_json::to_string(&p.to_string_lossy()).unwrap_or_default();
    let config = format!(
        "name: tokentap-replay-overhead
version: \"1.0\"
type: online
model_params:
  name: {tok}
  temperature: 0
  max_new_tokens: {max}
datasets:
  - name: agentic
    type: performance
    path: {ds}
    accuracy_config:
      eval_method: agentic_inference_inline
    agentic_inference:
      enable_salt: true
      inject_tool_delay: false
      num_trajectories_to_issue: {issue}
      stop_issuing_on_first_user_complete: false
settings:
  runtime:
    min_duration_ms: 0
    max_duration_ms: 0
  load_pattern:
    type: agentic_inference
    target_concurrency: {conc}
  client:
    stream_all_chunks: true
    warmup_connections: 0
endpoint_config:
  endpoints: [{url}]
  api_type: openai
report_dir: {dir}
",
        issue = e.trajectories,
        tok = q(e.tokenizer),
        max = e.max_tokens,
        ds = q(e.dataset),
        conc = e.concurrency,
        url = serde_json::to_string(e.url)?,
        dir = q(dir),
    );
    let cfg = dir.join("config.yaml");
    std::fs::write(&cfg, config)?;
    let log = dir.join("reference.log");
    let out = Command::new(std::env::current_exe()?)
        .arg("cpu-of")
        .arg(&log)
        .arg("--")
        .arg(reference)
        .args(["benchmark", "from-config", "--config"])
        .arg(&cfg)
        .envs([
            ("HF_HUB_OFFLINE", "1"),
            ("TRANSFORMERS_OFFLINE", "1"),
            ("HF_DATASETS_OFFLINE", "1"),
            ("TOKENIZERS_PARALLELISM", "false"),
        ])
        .stderr(Stdio::inherit())
        .output()?;
    let said = String::from_utf8_lossy(&out.stdout);
    let f: Vec<f64> = said
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let [code, user, system] = f[..] else {
        anyhow::bail!("cpu-of said {said:?}");
    };
    anyhow::ensure!(
        code == 0.0,
        "the reference exited with {code}: see {}",
        log.display()
    );
    let mut completed = std::collections::HashSet::new();
    let mut failed = std::collections::HashSet::new();
    let events = find_file(dir, "events.jsonl")
        .ok_or_else(|| anyhow::anyhow!("no events.jsonl under {}", dir.display()))?;
    for l in std::fs::read_to_string(&events)?.lines() {
        let v: Value = serde_json::from_str(l)?;
        let uuid = v["sample_uuid"].as_str().unwrap_or_default().to_string();
        match v["event_type"].as_str().unwrap_or_default() {
            "sample.complete" => {
                completed.insert(uuid);
            }
            t if t.starts_with("error.") => {
                failed.insert(uuid);
            }
            _ => {}
        }
    }
    Ok(ClientCost {
        turns: completed.difference(&failed).count() as u64,
        cpu_s: user + system,
    })
}

/// [`reference_cost`], run again (at most twice more) when the reference's HTTP workers did not
/// start within its own 60 s limit: ten Python processes starting on a busy 2-core machine can
/// miss it, and that failure is before any request.
fn reference_retried(reference: &Path, e: &Equal<'_>, dir: &Path) -> anyhow::Result<ClientCost> {
    let mut tries = 0;
    loop {
        match reference_cost(reference, e, dir) {
            Err(x) if tries < 2 && workers_late(dir) => {
                tries += 1;
                eprintln!("the reference's workers did not start in time ({x}); again");
                std::fs::remove_dir_all(dir)?;
            }
            r => return r,
        }
    }
}

fn workers_late(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("reference.log"))
        .is_ok_and(|l| l.contains("Workers failed to initialize"))
}

/// The first file named `name` under `dir`, depth first.
fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir).ok()?.flatten().collect();
    entries.sort_by_key(|e| e.path());
    for e in &entries {
        if e.file_name() == name {
            return Some(e.path());
        }
    }
    entries
        .iter()
        .filter(|e| e.path().is_dir())
        .find_map(|e| find_file(&e.path(), name))
}

async fn versus_reference(
    reference: PathBuf,
    load: SynthLoad,
    max_tokens: u64,
    rounds: usize,
) -> anyhow::Result<()> {
    let tokenizer = tokenizer().ok_or_else(|| {
        anyhow::anyhow!(
            "reference: --tokenizer DIR is required (both clients count tokens with it)"
        )
    })?;
    let tokenizer = std::fs::canonicalize(&tokenizer)?;
    let dir = temp_dir("reference")?;
    let (dataset, trajectories) = write_synth(&dir, load.scale, load.depth_scale)?;
    let ch = SimChild::start(&dir, load.mean_tokens, 0.7, 0.0)?;
    let mut rows: Vec<(&str, bool, ClientCost)> = Vec::new();
    println!(
        "{:>5}  {:<10} {:<14} {:>8} {:>9} {:>14}",
        "round", "client", "run", "turns", "CPU s", "CPU per turn"
    );
    for round in 0..rounds {
        let order: [&str; 2] = if round % 2 == 0 {
            ["reference", "tokentap"]
        } else {
            ["tokentap", "reference"]
        };
        for who in order {
            for one in [true, false] {
                let e = Equal {
                    url: &ch.url,
                    dataset: &dataset,
                    tokenizer: &tokenizer,
                    concurrency: load.concurrency,
                    max_tokens,
                    trajectories: if one { 1 } else { trajectories },
                };
                let at = dir.join(format!("{who}-{round}-{}", if one { "one" } else { "all" }));
                let cost = if who == "reference" {
                    reference_retried(&reference, &e, &at)?
                } else {
                    replay_cost(&e, at.clone()).await?
                };
                println!(
                    "{:>5}  {:<10} {:<14} {:>8} {:>9.2} {:>11.2} ms",
                    round,
                    who,
                    if one { "one trajectory" } else { "the dataset" },
                    cost.turns,
                    cost.cpu_s,
                    cost.cpu_s / cost.turns.max(1) as f64 * 1e3
                );
                rows.push((who, one, cost));
                let _ = std::fs::remove_dir_all(&at);
            }
        }
    }
    drop(ch.finish()?);
    // Per client: the median over rounds of CPU per turn, whole and with the start-up (the
    // one-trajectory run's CPU) taken out.
    let per_turn = |who: &str, net: bool| -> f64 {
        let all: Vec<&ClientCost> = rows
            .iter()
            .filter(|r| r.0 == who && !r.1)
            .map(|r| &r.2)
            .collect();
        let one: Vec<&ClientCost> = rows
            .iter()
            .filter(|r| r.0 == who && r.1)
            .map(|r| &r.2)
            .collect();
        let mut v: Vec<f64> = all
            .iter()
            .zip(&one)
            .map(|(a, o)| {
                if net {
                    (a.cpu_s - o.cpu_s) / (a.turns.saturating_sub(o.turns)).max(1) as f64
                } else {
                    a.cpu_s / a.turns.max(1) as f64
                }
            })
            .collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = match n {
            0 => f64::NAN,
            _ if n % 2 == 1 => v[n / 2],
            _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        };
        median * 1e3
    };
    for (label, net) in [("whole run", false), ("start-up taken out", true)] {
        let (r, t) = (per_turn("reference", net), per_turn("tokentap", net));
        println!(
            "CPU per turn, {label} (median of {rounds}): reference {r:.2} ms, tokentap {t:.3} ms: {:.1}× less",
            r / t
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Cmd::CpuOf { log, cmd } = &cli.cmd {
        return cpu_of(log, cmd);
    }
    FLUSH_EACH_CHUNK.store(cli.flush_each_chunk, std::sync::atomic::Ordering::Relaxed);
    let _ = TOKENIZER.set(cli.tokenizer.clone());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        match cli.cmd {
            Cmd::Latency {
                concurrency,
                tokens,
                turns,
                in_process,
                decode,
            } => {
                latency(
                    concurrency,
                    tokens,
                    turns,
                    in_process,
                    decode.as_secs_f64() * 1e3,
                )
                .await
            }
            Cmd::Tls {
                concurrency,
                tokens,
                turns,
                tokentap,
            } => tls(concurrency, tokens, turns, tokentap).await,
            Cmd::Full {
                load,
                include_usage,
            } => full(load, include_usage).await,
            Cmd::Reference {
                reference,
                load,
                max_tokens,
                rounds,
            } => versus_reference(reference, load, max_tokens, rounds).await,
            Cmd::CpuOf { .. } => unreachable!("handled before the runtime"),
            Cmd::ServeSim {
                log,
                mean_tokens,
                sigma,
                decode,
            } => serve_sim(log, mean_tokens, sigma, decode.as_secs_f64() * 1e3).await,
        }
    })
}
