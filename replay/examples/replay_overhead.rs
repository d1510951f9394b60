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
//! Run (release):
//! ```text
//! cargo run --release -p tokentap-replay --example replay_overhead -- latency [--flush-each-chunk]
//! cargo run --release -p tokentap-replay --example replay_overhead -- full --concurrency 64
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
    /// (same run), `full` counts with it.
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
        #[arg(long)]
        include_usage: bool,
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

async fn full(
    concurrency: usize,
    (scale, depth_scale): (f64, f64),
    mean_tokens: f64,
    include_usage: bool,
) -> anyhow::Result<()> {
    let dir = temp_dir("full")?;
    let path = dir.join("synth.jsonl");
    let cfg = tokentap_dataset::synth::SynthConfig {
        scale,
        depth_scale,
        ..Default::default()
    };
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
    let s = tokentap_dataset::synth::synth(&cfg, &mut f)?;
    f.flush()?;
    drop(f);
    println!(
        "dataset: {} trajectories, {} client turns ({:.1} per trajectory), {:.1} MB",
        s.trajectories,
        s.client_turns,
        s.client_turns as f64 / s.trajectories.max(1) as f64,
        s.bytes as f64 / 1e6
    );
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

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
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
                concurrency,
                scale,
                depth_scale,
                mean_tokens,
                include_usage,
            } => {
                full(
                    concurrency,
                    (scale, depth_scale),
                    mean_tokens,
                    include_usage,
                )
                .await
            }
            Cmd::ServeSim {
                log,
                mean_tokens,
                sigma,
                decode,
            } => serve_sim(log, mean_tokens, sigma, decode.as_secs_f64() * 1e3).await,
        }
    })
}
