//! What the proxy costs, measured side by side in one run.
//!
//! Topology: the zero-delay sim and the load-generating client run in this process; the proxy
//! runs in a **separate child process** (this same binary with `--child`), so its CPU time and
//! memory are read cleanly from `/proc/<pid>` and its allocations are counted by a counting
//! global allocator that only the child's work goes through.
//!
//! For each concurrency C (default 1, 64, 512) the client runs C closed-loop streams — first
//! straight to the sim, then through the proxy, same request count — and joins every SSE event
//! it received with the sim's log of when it wrote that event:
//! - latency per chunk = client arrival − sim write instant; *added* = proxied − direct, at p50
//!   and p99;
//! - TTFT = client send → first text event; added = proxied − direct, p50 and p99;
//! - chunk throughput ratio = proxied events/s ÷ direct events/s;
//! - proxy CPU per chunk = child utime+stime delta ÷ events forwarded (per-request work amortised);
//! - allocations per chunk, amortised (total ÷ events) and *marginal* (the steady path: the
//!   difference between runs with long and short streams, per extra chunk);
//! - memory per in-flight stream = child RSS with N streams held open mid-stream (a paced sim) −
//!   RSS before, ÷ N (includes both connections' buffers).
//!
//! The machine is 2 cores shared by client, sim and proxy: at high C the three compete, so the
//! throughput ratio reflects the proxy's CPU share, not only its latency.
//!
//! Run: `cargo run --release -p tokentap-proxy --example proxy_overhead -- [--streams 1,64,512]
//! [--tokens 128] [--requests 1024] [--decode-ms 0] [--no-extras]`
//!
//! With the zero-delay sim the whole box is saturated: per-chunk "latency" there is mostly time
//! spent queued in socket buffers (the sim writes far faster than anyone reads), so the
//! zero-delay run is the one for throughput ratio, CPU and allocations, and a paced run
//! (`--decode-ms 10`: offered load below capacity, as with a real engine) is the one for added
//! latency per chunk and TTFT.

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;
use tokentap_core::chunk::ChunkInfo;
use tokentap_core::clock;
use tokentap_core::sse::Framer;
use tokentap_core::stats::Samples;
use tokentap_sim::{SimConfig, SimServer};

#[global_allocator]
static GLOBAL: tokentap_benchutil::Counting = tokentap_benchutil::Counting;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--child") {
        return child(arg(&args, "--upstream").unwrap_or_default());
    }
    let streams: Vec<usize> = arg(&args, "--streams")
        .unwrap_or_else(|| "1,64,512".into())
        .split(',')
        .map(|s| s.trim().parse())
        .collect::<Result<_, _>>()?;
    let tokens: u64 = arg(&args, "--tokens").map_or(Ok(128), |s| s.parse())?;
    let requests: usize = arg(&args, "--requests").map_or(Ok(1024), |s| s.parse())?;
    let decode_ms: f64 = arg(&args, "--decode-ms").map_or(Ok(0.0), |s| s.parse())?;
    let extras = !args.iter().any(|a| a == "--no-extras");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(parent(streams, tokens, requests, decode_ms, extras))
}

/// The proxy process: serves until stdin closes; answers `stats` with its allocation count.
fn child(upstream: String) -> anyhow::Result<()> {
    // The proxy's runtime: multi-thread with one worker per core, as `tokentap proxy` runs;
    // PROXY_WORKERS=N overrides the worker count (1 = everything on one thread).
    let workers = std::env::var("PROXY_WORKERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let p = tokentap_proxy::Proxy::start(tokentap_proxy::Config::new([upstream])).await?;
        println!("listening on {}", p.base_url());
        std::io::stdout().flush()?;
        std::thread::spawn(|| {
            let stdin = std::io::stdin();
            for line in stdin.lock().lines() {
                let Ok(line) = line else { break };
                if line.trim() == "stats" {
                    println!("allocs {}", tokentap_benchutil::allocations());
                    let _ = std::io::stdout().flush();
                }
            }
            std::process::exit(0);
        });
        std::future::pending::<()>().await;
        Ok(())
    })
}

struct ChildProxy {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    url: String,
}

impl ChildProxy {
    fn spawn(upstream: &str) -> anyhow::Result<ChildProxy> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["--child", "--upstream", upstream])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take().ok_or_else(|| anyhow::anyhow!("stdin"))?;
        let mut stdout = BufReader::new(
            child
                .stdout
                .take()
                .ok_or_else(|| anyhow::anyhow!("stdout"))?,
        );
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .ok_or_else(|| anyhow::anyhow!("child said {line:?}"))?
            .to_string();
        Ok(ChildProxy {
            child,
            stdin,
            stdout,
            url,
        })
    }

    fn allocs(&mut self) -> anyhow::Result<u64> {
        writeln!(self.stdin, "stats")?;
        self.stdin.flush()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        Ok(line.trim().trim_start_matches("allocs ").parse()?)
    }

    /// utime + stime in ns (USER_HZ is 100 on Linux).
    fn cpu_ns(&self) -> anyhow::Result<u64> {
        let s = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))?;
        let after = &s[s.rfind(')').ok_or_else(|| anyhow::anyhow!("stat"))? + 2..];
        let f: Vec<&str> = after.split_whitespace().collect();
        let ticks: u64 = f[11].parse::<u64>()? + f[12].parse::<u64>()?;
        Ok(ticks * 10_000_000)
    }

    fn rss_kib(&self) -> anyhow::Result<u64> {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let l = s
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .ok_or_else(|| anyhow::anyhow!("VmRSS"))?;
        Ok(l.split_whitespace().nth(1).unwrap_or("0").parse()?)
    }
}

impl Drop for ChildProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request as the client saw it.
struct Seen {
    id: u64,
    sent: u64,
    /// Arrival instant of each SSE event, in order.
    events: Vec<u64>,
    /// Index of the first text-carrying event.
    first_text: Option<usize>,
}

type HttpClient = Client<HttpConnector, Full<Bytes>>;

fn client() -> HttpClient {
    let mut c = HttpConnector::new();
    c.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_max_idle_per_host(usize::MAX)
        .build(c)
}

fn body(tokens: u64) -> Bytes {
    let v = serde_json::json!({
        "model": "tokentap-sim",
        "messages": [{"role":"system","content":"bench"},{"role":"user","content":"go"}],
        "max_completion_tokens": tokens,
        "stream": true,
    });
    Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
}

async fn one(c: &HttpClient, url: &str, body: Bytes, slot: usize, id: u64) -> Option<Seen> {
    let req = Request::post(url)
        .header("content-type", "application/json")
        .header("x-session-id", format!("slot-{slot}"))
        .header("x-req-id", id.to_string())
        .body(Full::new(body))
        .ok()?;
    let sent = clock::now();
    let resp = c.request(req).await.ok()?;
    let mut b = resp.into_body();
    let mut framer = Framer::new();
    let mut seen = Seen {
        id,
        sent,
        events: Vec::with_capacity(160),
        first_text: None,
    };
    while let Some(Ok(f)) = b.frame().await {
        let t = clock::now();
        if let Ok(d) = f.into_data() {
            framer.feed(&d, |ev| {
                if seen.first_text.is_none()
                    && !ev.is_done()
                    && ChunkInfo::parse(ev.data).is_ok_and(|i| i.carries_text())
                {
                    seen.first_text = Some(seen.events.len());
                }
                seen.events.push(t);
            });
        }
    }
    Some(seen)
}

/// Runs `total` requests over `conc` closed-loop slots; returns what was seen and the wall time.
async fn phase(
    c: &HttpClient,
    url: &str,
    conc: usize,
    total: usize,
    tokens: u64,
    base_id: u64,
) -> (Vec<Seen>, u64) {
    let url = format!("{url}/v1/chat/completions");
    let t0 = clock::now();
    let mut tasks = Vec::new();
    for slot in 0..conc {
        let (c, url) = (c.clone(), url.clone());
        let n = total / conc + usize::from(slot < total % conc);
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::with_capacity(n);
            for k in 0..n {
                let id = base_id + (slot * 1_000_000 + k) as u64;
                if let Some(s) = one(&c, &url, body(tokens), slot, id).await {
                    out.push(s);
                }
            }
            out
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        if let Ok(v) = t.await {
            all.extend(v);
        }
    }
    (all, clock::now() - t0)
}

struct Joined {
    chunk_lat: Samples,
    ttft: Samples,
    events: u64,
}

fn join(seen: &[Seen], sim: &SimServer) -> Joined {
    let log = sim.log();
    let by_id: HashMap<u64, &tokentap_sim::RequestLog> = log
        .iter()
        .filter_map(|l| {
            l.headers
                .iter()
                .find(|(k, _)| k == "x-req-id")
                .and_then(|(_, v)| v.parse().ok())
                .map(|id| (id, l))
        })
        .collect();
    let mut j = Joined {
        chunk_lat: Samples::new(),
        ttft: Samples::new(),
        events: 0,
    };
    for s in seen {
        j.events += s.events.len() as u64;
        if let Some(i) = s.first_text {
            j.ttft.push((s.events[i] - s.sent) as f64);
        }
        let Some(l) = by_id.get(&s.id) else { continue };
        for (arr, w) in s.events.iter().zip(&l.chunks) {
            j.chunk_lat.push(*arr as f64 - w.mono_ns as f64);
        }
    }
    j
}

fn us(ns: f64) -> f64 {
    ns / 1000.0
}

async fn parent(
    streams: Vec<usize>,
    tokens: u64,
    requests: usize,
    decode_ms: f64,
    extras: bool,
) -> anyhow::Result<()> {
    let mut cfg = SimConfig::zero_delay();
    cfg.output.always_max = true;
    cfg.timing.decode_ms = decode_ms;
    let sim = SimServer::start(cfg).await?;
    let mut px = ChildProxy::spawn(&sim.base_url())?;
    let c = client();
    // Warm both paths (connections, pools, allocator arenas).
    let _ = phase(&c, &sim.base_url(), 8, 64, tokens, 0).await;
    let _ = phase(&c, &px.url, 8, 64, tokens, 0).await;
    sim.clear_log();
    let mode = if decode_ms > 0.0 {
        format!("paced sim ({decode_ms} ms per token)")
    } else {
        "zero-delay sim".to_string()
    };
    println!("# tokentap proxy overhead — {mode}, {tokens} tokens/request, requests per level: max({requests}, 4×C)");
    println!("| C | added chunk p50 µs | added chunk p99 µs | added TTFT p50 µs | added TTFT p99 µs | direct chunk/s | proxied chunk/s | ratio | proxy CPU µs/chunk | allocs/chunk (amortised) |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut id = 1_000_000_000u64;
    for &conc in &streams {
        let total = requests.max(conc * 4);
        let (d_seen, d_wall) = phase(&c, &sim.base_url(), conc, total, tokens, id).await;
        id += 1_000_000_000;
        let mut d = join(&d_seen, &sim);
        sim.clear_log();
        let a0 = px.allocs()?;
        let cpu0 = px.cpu_ns()?;
        let (p_seen, p_wall) = phase(&c, &px.url, conc, total, tokens, id).await;
        id += 1_000_000_000;
        let cpu1 = px.cpu_ns()?;
        let a1 = px.allocs()?;
        let mut p = join(&p_seen, &sim);
        sim.clear_log();
        let dr = d.events as f64 / (d_wall as f64 / 1e9);
        let pr = p.events as f64 / (p_wall as f64 / 1e9);
        let (dc, pc) = (d.chunk_lat.percentiles(), p.chunk_lat.percentiles());
        let (dt, pt) = (d.ttft.percentiles(), p.ttft.percentiles());
        if let (Some(dc), Some(pc), Some(dt), Some(pt)) = (dc, pc, dt, pt) {
            println!(
                "| {conc} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} | {:.3} | {:.2} | {:.3} |",
                us(pc.p50 - dc.p50),
                us(pc.p99 - dc.p99),
                us(pt.p50 - dt.p50),
                us(pt.p99 - dt.p99),
                dr,
                pr,
                pr / dr,
                us((cpu1 - cpu0) as f64 / p.events.max(1) as f64),
                (a1 - a0) as f64 / p.events.max(1) as f64,
            );
            println!(
                "|   | (direct chunk p50/p99 {:.1}/{:.1} µs, proxied {:.1}/{:.1} µs; TTFT direct {:.1}/{:.1}, proxied {:.1}/{:.1}) |||||||||",
                us(dc.p50), us(dc.p99), us(pc.p50), us(pc.p99), us(dt.p50), us(dt.p99), us(pt.p50), us(pt.p99)
            );
        }
    }
    if !extras {
        return Ok(());
    }
    // Marginal allocations per chunk: same requests, long vs short streams, through the proxy.
    let (short, long) = (16u64, 1024u64);
    let n = 128;
    let a0 = px.allocs()?;
    let (s_seen, _) = phase(&c, &px.url, 16, n, short, id).await;
    let a1 = px.allocs()?;
    let (l_seen, _) = phase(&c, &px.url, 16, n, long, id + 1_000_000_000).await;
    let a2 = px.allocs()?;
    sim.clear_log();
    let ev = |v: &[Seen]| v.iter().map(|s| s.events.len() as u64).sum::<u64>();
    let extra_chunks = ev(&l_seen) as f64 - ev(&s_seen) as f64;
    let extra_allocs = (a2 - a1) as f64 - (a1 - a0) as f64;
    println!(
        "\nsteady path: {:.4} allocations per extra forwarded chunk ({} vs {} tokens/request, {n} requests each; {:.0} vs {:.0} allocs per request)",
        extra_allocs / extra_chunks,
        long,
        short,
        (a2 - a1) as f64 / n as f64,
        (a1 - a0) as f64 / n as f64
    );
    drop(px);

    // Memory per in-flight stream: a paced sim keeps N streams open.
    let held = 512usize;
    let mut pcfg = SimConfig::zero_delay();
    pcfg.output.always_max = true;
    pcfg.timing.decode_ms = 20.0;
    let paced = SimServer::start(pcfg).await?;
    let px = ChildProxy::spawn(&paced.base_url())?;
    let _ = phase(&c, &px.url, 4, 8, 4, id).await;
    let rss0 = px.rss_kib()?;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(held);
    let url = format!("{}/v1/chat/completions", px.url);
    let mut bodies = Vec::new();
    for i in 0..held {
        let (c, url, tx) = (c.clone(), url.clone(), tx.clone());
        bodies.push(tokio::spawn(async move {
            let req = Request::post(&url)
                .header("content-type", "application/json")
                .header("x-session-id", format!("held-{i}"))
                .body(Full::new(body(300)))
                .ok()?;
            let resp = c.request(req).await.ok()?;
            let mut b = resp.into_body();
            let _ = b.frame().await;
            let _ = tx.send(()).await;
            while let Some(Ok(_)) = b.frame().await {}
            Some(())
        }));
    }
    for _ in 0..held {
        rx.recv().await;
    }
    let rss1 = px.rss_kib()?;
    println!(
        "memory: {held} streams in flight through the proxy: RSS {rss0} KiB → {rss1} KiB, {:.1} KiB per in-flight stream (both connections included)",
        (rss1 as f64 - rss0 as f64) / held as f64
    );
    for b in bodies {
        b.abort();
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    Ok(())
}
