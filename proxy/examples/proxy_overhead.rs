//! What the proxy costs, measured side by side in one run — against no proxy and, with
//! `--nginx`, against nginx in front of the same server.
//!
//! Topology: the sim and the load-generating client run in this process; the proxy runs in a
//! **separate child process** (this same binary with `--child`), so its CPU time and memory are
//! read cleanly from `/proc/<pid>` and its allocations are counted by a counting global
//! allocator that only the child's work goes through. nginx (`--nginx`, Debian's
//! `nginx-light`) runs as master + one worker per core with `proxy_buffering off`, kept-alive
//! upstream connections and `tcp_nodelay`.
//!
//! For each concurrency C the client runs C closed-loop streams — straight to the sim, through
//! the proxy, through nginx, same request count — and joins every SSE event it received with
//! the sim's log of when it wrote that event:
//! - the sim writes each chunk on its own (`flush_each_chunk`), so its stamp is the write;
//! - the client's arrival is the kernel's receive timestamp of the read that completed the
//!   event (`tokentap_replay::rx`), so the client's own scheduling is not in any number; in
//!   paced runs every read stops at the end of the current HTTP chunk (each event is stamped
//!   with its own packet), in zero-delay runs reads take what is there;
//! - latency per chunk = client arrival − sim write; *added* = through a proxy − direct, p50/p99;
//! - TTFT = client send → first text event; added likewise;
//! - chunk throughput ratio = proxied events/s ÷ direct events/s;
//! - CPU per chunk = the CPU time of every thread of the proxy's processes (schedstat,
//!   nanoseconds) ÷ events forwarded; wake-ups per chunk = their voluntary context switches ÷
//!   events; system calls per chunk = every system call their threads entered (the kernel's
//!   `raw_syscalls:sys_enter` tracepoint, counted per thread with `perf_event_open`: `send`,
//!   `recv`, `writev`, `epoll_wait`, futexes alike) ÷ events — `-` where the kernel refuses the
//!   counter (it needs root, or `kernel.perf_event_paranoid` ≤ -1, and tracefs; the reason is
//!   printed once);
//! - allocations per chunk (ours), amortised and *marginal* (long vs short streams);
//! - memory per in-flight stream = RSS with N streams held open mid-stream.
//!
//! Run: `cargo run --release -p tokentap-proxy --example proxy_overhead -- [--streams 1,64,512]
//! [--tokens 128] [--requests 1024] [--decode 0] [--no-extras] [--nginx] [--hyper]`
//! (`--hyper`: also the proxy with `--upstream-client hyper`, the hyper-util client it had before;
//! `--pin`: sim and client on CPU 0, each proxy on CPU 1 with one worker — the proxy with a core
//! of its own instead of competing with the load generator; needs `taskset`.)
//! (`PROXY_THREADS=N`: the proxy child's `--threads`; `PROXY_WORKERS=N` / `PROXY_RT=current`:
//! the runtime its accept loop runs on.)
//! (`--variant NAME:K=V,…`: the proxy again as `tokentap-NAME`, with these environment
//! variables; `BIN=PATH` among them runs that build of this example as the proxy, e.g. an
//! earlier commit's, so a before and after are measured in one run.)
//! (`--rounds N`: every level N times, the proxies' order reversed each round; after the table,
//! each path beside nginx as medians over the rounds, with the ratio.)
//! (`--decode` is the sim's decode time per token, a duration.)
//! (`--api chat,responses,messages`: the same table for each API in turn, in one run — the
//! OpenAI Responses API and the Anthropic Messages API beside chat completions; chunks are then
//! joined on their token-carrying events only, the one event of each text frame the sim writes,
//! so the three are measured alike.)
//!
//! Rows: `direct` (no proxy), `tokentap` (the proxy as shipped, `--upstream-client direct`),
//! `tokentap-hyper` (with `--hyper`) and `nginx` (with `--nginx`); after the table, unless
//! `--no-extras`, the marginal allocations per chunk (`ALLOC_STREAMS=short,long` sets the two
//! stream lengths) and the memory per in-flight stream.
//!
//! Results (every table, the commands that produced them, the date and the machine):
//! docs/benchmarks.md, "Proxy, end to end".

use bytes::Bytes;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;
use tokentap_core::clock;
use tokentap_core::http1;
use tokentap_core::sse::Framer;
use tokentap_core::stats::Samples;
use tokentap_replay::rx::RxStream;
use tokentap_sim::{SimConfig, SimServer};
use tokio::io::AsyncWriteExt;

/// The API the load speaks now (`--api`): 0 chat completions, 1 Responses, 2 Messages.
static API: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
/// `--api` was given: join token-carrying events with the sim's text frames.
static TEXT_JOIN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn api() -> (&'static str, tokentap_core::events::Api) {
    use tokentap_core::events::Api;
    match API.load(std::sync::atomic::Ordering::Relaxed) {
        1 => (Api::Responses.as_str(), Api::Responses),
        2 => (Api::Messages.as_str(), Api::Messages),
        _ => (Api::Chat.as_str(), Api::Chat),
    }
}

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
        return child(
            arg(&args, "--upstream").unwrap_or_default(),
            arg(&args, "--client").as_deref() == Some("hyper"),
        );
    }
    let streams: Vec<usize> = arg(&args, "--streams")
        .unwrap_or_else(|| "1,64,512".into())
        .split(',')
        .map(|s| s.trim().parse())
        .collect::<Result<_, _>>()?;
    let tokens: u64 = arg(&args, "--tokens").map_or(Ok(128), |s| s.parse())?;
    let requests: usize = arg(&args, "--requests").map_or(Ok(1024), |s| s.parse())?;
    let decode_ms: f64 = match arg(&args, "--decode") {
        Some(s) => {
            tokentap_core::duration::parse(&s)
                .map_err(anyhow::Error::msg)?
                .as_secs_f64()
                * 1e3
        }
        None => 0.0,
    };
    let extras = !args.iter().any(|a| a == "--no-extras");
    let apis: Vec<u8> = match arg(&args, "--api") {
        Some(list) => {
            TEXT_JOIN.store(true, std::sync::atomic::Ordering::Relaxed);
            list.split(',')
                .map(|a| match a.trim() {
                    "chat" => Ok(0),
                    "responses" => Ok(1),
                    "messages" => Ok(2),
                    other => Err(anyhow::anyhow!(
                        "--api: expected chat, responses or messages, found {other:?}"
                    )),
                })
                .collect::<anyhow::Result<_>>()?
        }
        None => vec![0],
    };
    let peers = Peers {
        nginx: args.iter().any(|a| a == "--nginx"),
        hyper: args.iter().any(|a| a == "--hyper"),
        pin: args.iter().any(|a| a == "--pin"),
        variants: args
            .iter()
            .enumerate()
            .filter(|(_, a)| *a == "--variant")
            .filter_map(|(i, _)| args.get(i + 1))
            .map(|v| {
                let (name, env) = v.split_once(':').unwrap_or((v, ""));
                let env = env
                    .split(',')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                (name.to_string(), env)
            })
            .collect(),
        rounds: arg(&args, "--rounds").map_or(Ok(1), |s| s.parse())?.max(1),
    };

    if peers.pin {
        // Sim and client on CPU 0 (threads inherit this); proxies on CPU 1.
        let mut set = nix::sched::CpuSet::new();
        set.set(0)?;
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(if peers.pin { 1 } else { 2 })
        .enable_all()
        .build()?;
    rt.block_on(parent(
        streams, tokens, requests, decode_ms, extras, peers, apis,
    ))
}

/// The proxy process: serves until stdin closes; answers `stats` with its allocation count.
fn child(upstream: String, hyper: bool) -> anyhow::Result<()> {
    // The proxy's runtime: multi-thread with one worker per core, as `tokentap proxy` runs;
    // PROXY_WORKERS=N overrides the worker count (1 = everything on one thread).
    let workers = std::env::var("PROXY_WORKERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    // PROXY_RT=current: a current_thread runtime (experiment).
    let rt = if std::env::var("PROXY_RT").as_deref() == Ok("current") {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()?
    };
    rt.block_on(async move {
        let mut cfg = tokentap_proxy::Config::new([upstream]);
        // PROXY_THREADS=N: the serving threads (`--threads`).
        if let Some(n) = std::env::var("PROXY_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            cfg.threads = n;
        }
        if hyper {
            cfg.upstream_client = tokentap_proxy::config::UpstreamClient::Hyper;
        }
        let p = tokentap_proxy::Proxy::start(cfg).await?;
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

/// `program`, run on CPU 1 alone (through `taskset`) when `pin`.
fn on_cpu1(program: impl AsRef<std::ffi::OsStr>, pin: bool) -> Command {
    if pin {
        let mut c = Command::new("taskset");
        c.args(["-c", "1"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

struct ChildProxy {
    child: Child,
    /// Closed on drop: the child then exits by itself (so an instrumented build writes its
    /// profile).
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    url: String,
}

impl ChildProxy {
    /// `client`: `direct` (the default) or `hyper` (`--upstream-client`). `pin`: on CPU 1 with
    /// one worker thread.
    fn spawn(
        upstream: &str,
        client: &str,
        pin: bool,
        env: &[(String, String)],
    ) -> anyhow::Result<ChildProxy> {
        // `BIN=PATH` among the variables: that build of this example is the child (a before
        // and after in one run).
        let exe = match env.iter().find(|(k, _)| k == "BIN") {
            Some((_, bin)) => std::path::PathBuf::from(bin),
            None => std::env::current_exe()?,
        };
        let mut cmd = on_cpu1(exe, pin);
        if pin {
            cmd.env("PROXY_WORKERS", "1");
        }
        cmd.envs(env.iter().filter(|(k, _)| k != "BIN").map(|(k, v)| (k, v)));
        let mut child = cmd
            .args(["--child", "--upstream", upstream, "--client", client])
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
        let url =
            tokentap_testkit::spawn::try_announced(&mut (&mut stdout).lines(), "listening on ")
                .map_err(anyhow::Error::msg)?;
        Ok(ChildProxy {
            child,
            stdin: Some(stdin),
            stdout,
            url,
        })
    }

    fn allocs(&mut self) -> anyhow::Result<u64> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("stdin closed"))?;
        writeln!(stdin, "stats")?;
        stdin.flush()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        Ok(line.trim().trim_start_matches("allocs ").parse()?)
    }

    fn pids(&self) -> anyhow::Result<Vec<u32>> {
        Ok(vec![self.child.id()])
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
        // Its stdin closed, the child exits through `exit` (atexit handlers run: a build with
        // `-Cprofile-generate` writes its profile); killed if it has not within 5 s.
        drop(self.stdin.take());
        let deadline = clock::now() + 5_000_000_000;
        while clock::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request as the client saw it.
struct Seen {
    id: u64,
    sent: u64,
    /// Arrival instant of each SSE event (kernel receive timestamp of the read that completed
    /// it), in order.
    events: Vec<u64>,
    /// Arrival instant of each token-carrying event.
    texts: Vec<u64>,
    /// Index of the first text-carrying event.
    first_text: Option<usize>,
}

/// The load client: one kept-alive HTTP/1.1 connection per slot whose reads carry the kernel's
/// receive timestamps (`tokentap_replay::rx`), so an arrival is when the bytes reached the
/// host, not when this process — which also runs the sim — got round to reading them. With
/// `precise`, every read stops at the end of the current HTTP chunk, so each event is stamped
/// with its own packet even when several wait in the socket (two reads per chunk: used for the
/// latency runs; the throughput runs read whatever is there).
struct Slot {
    addr: std::net::SocketAddr,
    io: Option<RxStream>,
    buf: Vec<u8>,
    precise: bool,
}

impl Slot {
    fn new(url: &str, precise: bool) -> anyhow::Result<Slot> {
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .parse()?;
        Ok(Slot {
            addr,
            io: None,
            buf: vec![0; 64 * 1024],
            precise,
        })
    }

    async fn one(&mut self, body: &Bytes, slot: usize, id: u64) -> anyhow::Result<Seen> {
        if self.io.is_none() {
            let s = tokio::net::TcpStream::connect(self.addr).await?;
            self.io = Some(RxStream::new(s, true)?);
        }
        let Some(io) = self.io.as_mut() else {
            anyhow::bail!("no connection")
        };
        let (path, parser) = api();
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\nx-session-id: slot-{slot}\r\nx-req-id: {id}\r\ncontent-length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        let mut req = head.into_bytes();
        req.extend_from_slice(body);
        let sent = clock::now();
        io.stream().write_all(&req).await?;
        let mut seen = Seen {
            id,
            sent,
            events: Vec::with_capacity(160),
            texts: Vec::with_capacity(160),
            first_text: None,
        };
        let mut framer = Framer::new();
        let mut filled = 0;
        let (mut decoder, mut from, mut to, mut r) = loop {
            let r = io.read(&mut self.buf[filled..filled + 256]).await?;
            anyhow::ensure!(r.n > 0, "closed before the response head");
            filled += r.n;
            if let Some((len, h)) = http1::parse_head(&self.buf[..filled])? {
                anyhow::ensure!(h.status == 200, "HTTP {}", h.status);
                break (http1::Decoder::new(h.framing), len, filled, r);
            }
        };
        loop {
            let input = &self.buf[from..to];
            let at = r.at;
            decoder.feed(input, |d| {
                framer.feed(d, |ev| {
                    let text = !ev.is_done()
                        && tokentap_core::events::Dialect::from(parser)
                            .parse(ev.data)
                            .is_ok_and(|e| e.info.carries_text());
                    if seen.first_text.is_none() && text {
                        seen.first_text = Some(seen.events.len());
                    }
                    if text {
                        seen.texts.push(at);
                    }
                    seen.events.push(at);
                })
            })?;
            if decoder.is_done() {
                return Ok(seen);
            }
            let cap = match (self.precise, decoder.piece_left()) {
                (true, Some(n)) => (n as usize).clamp(1, self.buf.len()),
                _ => self.buf.len(),
            };
            r = io.read(&mut self.buf[..cap]).await?;
            anyhow::ensure!(r.n > 0, "closed mid-response");
            (from, to) = (0, r.n);
        }
    }
}

fn body(tokens: u64) -> Bytes {
    // The same prompt in each API's words.
    let v = match API.load(std::sync::atomic::Ordering::Relaxed) {
        1 => serde_json::json!({
            "model": "tokentap-sim", "instructions": "bench", "input": "go",
            "max_output_tokens": tokens, "stream": true,
        }),
        2 => serde_json::json!({
            "model": "tokentap-sim", "system": "bench", "messages": [{"role":"user","content":"go"}],
            "max_tokens": tokens, "stream": true,
        }),
        _ => serde_json::json!({
            "model": "tokentap-sim",
            "messages": [{"role":"system","content":"bench"},{"role":"user","content":"go"}],
            "max_completion_tokens": tokens,
            "stream": true,
        }),
    };
    Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
}

/// Runs `total` requests over `conc` closed-loop slots; returns what was seen and the wall time.
async fn phase(
    url: &str,
    conc: usize,
    total: usize,
    tokens: u64,
    base_id: u64,
    precise: bool,
) -> (Vec<Seen>, u64) {
    let t0 = clock::now();
    let mut tasks = Vec::new();
    let b = body(tokens);
    for slot in 0..conc {
        let (url, b) = (url.to_string(), b.clone());
        let n = total / conc + usize::from(slot < total % conc);
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::with_capacity(n);
            let Ok(mut c) = Slot::new(&url, precise) else {
                return out;
            };
            for k in 0..n {
                let id = base_id + (slot * 1_000_000 + k) as u64;
                match c.one(&b, slot, id).await {
                    Ok(s) => out.push(s),
                    Err(e) => {
                        eprintln!("request failed: {e}");
                        c.io = None;
                    }
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
    let text_join = TEXT_JOIN.load(std::sync::atomic::Ordering::Relaxed);
    for s in seen {
        // With --api, rates and CPU are per token-carrying chunk (the APIs differ in events
        // around them).
        j.events += if text_join {
            s.texts.len()
        } else {
            s.events.len()
        } as u64;
        if let Some(i) = s.first_text {
            j.ttft.push((s.events[i] - s.sent) as f64);
        }
        let Some(l) = by_id.get(&s.id) else { continue };
        if text_join {
            let text = |k: &tokentap_sim::ChunkKind| {
                use tokentap_sim::ChunkKind::*;
                matches!(k, Reasoning | Content | ToolCall)
            };
            let writes = l.chunks.iter().filter(|c| text(&c.kind));
            for (arr, w) in s.texts.iter().zip(writes) {
                j.chunk_lat.push(*arr as f64 - w.mono_ns as f64);
            }
            continue;
        }
        for (arr, w) in s.events.iter().zip(&l.chunks) {
            j.chunk_lat.push(*arr as f64 - w.mono_ns as f64);
        }
    }
    j
}

fn us(ns: f64) -> f64 {
    ns / 1000.0
}

/// nginx as a peer: the same upstream, streaming unbuffered (`proxy_buffering off`), kept-alive
/// upstream connections, `tcp_nodelay`, one worker per core — what `scripts/install-test-deps`
/// would not install; `apt-get install nginx-light` does.
struct Nginx {
    child: Child,
    url: String,
    dir: std::path::PathBuf,
}

impl Nginx {
    /// `pin`: one worker, on CPU 1.
    fn spawn(upstream: &str, pin: bool) -> anyhow::Result<Nginx> {
        let dir = tempfile::Builder::new()
            .prefix("tokentap-nginx-")
            .tempdir()?
            .keep();
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let up = upstream.trim_start_matches("http://");
        let d = dir.display();
        let workers = if pin { "1" } else { "auto" };
        let conf = format!(
            "daemon off;\nmaster_process on;\nworker_processes {workers};\nerror_log {d}/error.log warn;\npid {d}/nginx.pid;\n\
             events {{ worker_connections 8192; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
             upstream sim {{ server {up}; keepalive 1024; keepalive_requests 1000000; }}\n\
             server {{\n    listen 127.0.0.1:{port};\n    keepalive_requests 1000000;\n    tcp_nodelay on;\n\
             location / {{ proxy_pass http://sim; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off; proxy_request_buffering off; }}\n  }}\n}}\n"
        );
        let path = dir.join("nginx.conf");
        std::fs::write(&path, conf)?;
        let child = on_cpu1("nginx", pin)
            .args(["-p", &dir.to_string_lossy(), "-c", &path.to_string_lossy()])
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| anyhow::anyhow!("nginx: {e} (apt-get install nginx-light)"))?;
        // Ready when it accepts a connection (polled, bounded).
        let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse()?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(addr).is_err() {
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "nginx did not start"
            );
            std::thread::yield_now();
        }
        Ok(Nginx {
            child,
            url: format!("http://{addr}"),
            dir,
        })
    }

    /// The master's and its workers' process ids.
    fn pids(&self) -> anyhow::Result<Vec<u32>> {
        let master = self.child.id();
        let mut pids = vec![master];
        for e in std::fs::read_dir("/proc")?.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if let Ok(st) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                let after = &st[st.rfind(')').unwrap_or(0) + 2..];
                if after.split_whitespace().nth(1) == Some(&master.to_string()) {
                    pids.push(pid);
                }
            }
        }
        Ok(pids)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // `nginx -s stop` signals the master, which stops its workers (a SIGKILL to the master
        // would leave them running).
        let conf = self.dir.join("nginx.conf");
        let stopped = Command::new("nginx")
            .args([
                "-p",
                &self.dir.to_string_lossy(),
                "-c",
                &conf.to_string_lossy(),
                "-s",
                "stop",
            ])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !stopped {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What the kernel counted of a set of processes, every thread summed: CPU time (schedstat,
/// nanoseconds, not ticks) and wake-ups (voluntary context switches: each is a thread that
/// blocked — in `epoll_wait`, a futex — and had to be woken again).
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    cpu_ns: u64,
    wakeups: u64,
}

/// The thread ids of `pids` now (`/proc/PID/task`).
fn threads(pids: &[u32]) -> std::io::Result<Vec<u32>> {
    let mut tids = Vec::new();
    for pid in pids {
        for t in std::fs::read_dir(format!("/proc/{pid}/task"))?.flatten() {
            tids.extend(t.file_name().to_string_lossy().parse::<u32>().ok());
        }
    }
    Ok(tids)
}

impl Counters {
    fn of(pids: &[u32]) -> anyhow::Result<Counters> {
        let mut c = Counters::default();
        for tid in threads(pids)? {
            let Ok(sched) = std::fs::read_to_string(format!("/proc/{tid}/schedstat")) else {
                continue; // the thread ended meanwhile
            };
            c.cpu_ns += sched
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
            let status = std::fs::read_to_string(format!("/proc/{tid}/status")).unwrap_or_default();
            c.wakeups += field(&status, "voluntary_ctxt_switches:");
        }
        Ok(c)
    }

    fn since(self, before: Counters) -> Counters {
        Counters {
            cpu_ns: self.cpu_ns.saturating_sub(before.cpu_ns),
            wakeups: self.wakeups.saturating_sub(before.wakeups),
        }
    }
}

/// The system calls a set of processes make, every thread counted: one counter per thread on
/// the kernel's `raw_syscalls:sys_enter` tracepoint (`perf_event_open`, the counting mode of
/// `perf stat -e raw_syscalls:sys_enter`), opened for one measured phase.
struct Syscalls {
    counters: Vec<std::fs::File>,
}

/// `struct perf_event_attr` up to `PERF_ATTR_SIZE_VER5` (112 bytes; linux/perf_event.h).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved: u16,
}

impl Syscalls {
    /// Counters on every thread of `pids` now, or why the kernel refused one.
    fn attach(pids: &[u32]) -> Result<Syscalls, String> {
        use std::os::fd::FromRawFd;
        const TRACEPOINT: &str = "events/raw_syscalls/sys_enter/id";
        let id: u64 = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
            .iter()
            .find_map(|d| std::fs::read_to_string(format!("{d}/{TRACEPOINT}")).ok())
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| {
                format!("no tracefs with {TRACEPOINT} (mount -t tracefs nodev /sys/kernel/tracing)")
            })?;
        let mut counters = Vec::new();
        for tid in threads(pids).map_err(|e| format!("the threads of {pids:?}: {e}"))? {
            let attr = PerfEventAttr {
                kind: 2, // PERF_TYPE_TRACEPOINT
                size: std::mem::size_of::<PerfEventAttr>() as u32,
                config: id,
                flags: 1 << 1, // inherit: threads this one starts are counted too
                ..PerfEventAttr::default()
            };
            // SAFETY: `attr` is a valid `perf_event_attr` of the size it declares, alive for
            // the call; the kernel returns a new file descriptor or -1.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_perf_event_open,
                    &attr as *const PerfEventAttr,
                    tid as i32,
                    -1i32,
                    -1i32,
                    libc::c_ulong::from(8u32), // PERF_FLAG_FD_CLOEXEC
                )
            };
            if fd < 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::ESRCH) {
                    continue; // the thread ended meanwhile
                }
                return Err(format!(
                    "perf_event_open(raw_syscalls:sys_enter) on thread {tid}: {e} (needs root, or kernel.perf_event_paranoid ≤ -1)"
                ));
            }
            // SAFETY: `fd` was just returned by the kernel and is owned by nothing else.
            counters.push(unsafe { std::fs::File::from_raw_fd(fd as i32) });
        }
        Ok(Syscalls { counters })
    }

    /// System calls entered since [`Syscalls::attach`].
    fn count(&self) -> u64 {
        use std::io::Read;
        self.counters
            .iter()
            .map(|mut f| {
                let mut b = [0u8; 8];
                f.read_exact(&mut b).map_or(0, |_| u64::from_ne_bytes(b))
            })
            .sum()
    }
}

/// `x` with two decimals, `-` when not measured (NaN).
fn dash_or(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{x:.2}")
    }
}

/// The number after `name` on its line of a /proc text (0 when missing).
fn field(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// One measured path's numbers at one concurrency.
struct Level {
    chunk: tokentap_core::stats::Percentiles,
    ttft: tokentap_core::stats::Percentiles,
    rate: f64,
    events: u64,
}

async fn measure(
    sim: &SimServer,
    url: &str,
    conc: usize,
    total: usize,
    tokens: u64,
    id: u64,
    precise: bool,
) -> anyhow::Result<Level> {
    sim.clear_log();
    let (seen, wall) = phase(url, conc, total, tokens, id, precise).await;
    let mut j = join(&seen, sim);
    sim.clear_log();
    Ok(Level {
        chunk: j
            .chunk_lat
            .percentiles()
            .ok_or_else(|| anyhow::anyhow!("no chunks"))?,
        ttft: j
            .ttft
            .percentiles()
            .ok_or_else(|| anyhow::anyhow!("no ttft"))?,
        rate: j.events as f64 / (wall as f64 / 1e9),
        events: j.events,
    })
}

/// The peers measured beside the proxy: nginx, and the proxy with hyper-util's upstream client;
/// `pin`: sim and client on CPU 0, every proxy on CPU 1 with one worker (a sidecar with a core
/// of its own, as beside a many-core GPU server), the direct path on CPU 0 alone.
struct Peers {
    nginx: bool,
    hyper: bool,
    pin: bool,
    /// `--variant NAME:K=V,K=V`: the proxy again, with these environment variables.
    variants: Vec<(String, Vec<(String, String)>)>,
    /// `--rounds`: each level this many times.
    rounds: usize,
}

/// A measured path other than `direct`.
enum Peer {
    Ours(ChildProxy),
    Nginx(Nginx),
}

impl Peer {
    fn url(&self) -> &str {
        match self {
            Peer::Ours(c) => &c.url,
            Peer::Nginx(n) => &n.url,
        }
    }

    fn pids(&self) -> anyhow::Result<Vec<u32>> {
        match self {
            Peer::Ours(c) => c.pids(),
            Peer::Nginx(n) => n.pids(),
        }
    }

    fn counters(&self) -> anyhow::Result<Counters> {
        Counters::of(&self.pids()?)
    }

    fn allocs(&mut self) -> anyhow::Result<Option<u64>> {
        match self {
            Peer::Ours(c) => c.allocs().map(Some),
            Peer::Nginx(_) => Ok(None),
        }
    }
}

async fn parent(
    streams: Vec<usize>,
    tokens: u64,
    requests: usize,
    decode_ms: f64,
    extras: bool,
    peers: Peers,
    apis: Vec<u8>,
) -> anyhow::Result<()> {
    let rounds = peers.rounds;
    let mut cfg = SimConfig::zero_delay();
    cfg.output.always_max = true;
    cfg.timing.decode_ms = decode_ms;
    // One write per chunk, so the sim's stamp of a chunk is its write (not the start of a
    // batch of ready chunks).
    cfg.timing.flush_each_chunk = true;
    let sim = SimServer::start(cfg).await?;
    // The measured paths besides `direct`: the proxy as shipped, its variants (`--variant`),
    // hyper's client (`--hyper`), nginx (`--nginx`).
    let mut paths: Vec<(String, Peer)> = vec![(
        "tokentap".into(),
        Peer::Ours(ChildProxy::spawn(
            &sim.base_url(),
            "direct",
            peers.pin,
            &[],
        )?),
    )];
    for (name, env) in &peers.variants {
        let c = ChildProxy::spawn(&sim.base_url(), "direct", peers.pin, env)?;
        paths.push((format!("tokentap-{name}"), Peer::Ours(c)));
    }
    if peers.hyper {
        let c = ChildProxy::spawn(&sim.base_url(), "hyper", peers.pin, &[])?;
        paths.push(("tokentap-hyper".into(), Peer::Ours(c)));
    }
    if peers.nginx {
        paths.push((
            "nginx".into(),
            Peer::Nginx(Nginx::spawn(&sim.base_url(), peers.pin)?),
        ));
    }
    // Paced runs measure latency: reads stop at each chunk's end. Zero-delay runs measure
    // throughput: reads take what is there.
    let precise = decode_ms > 0.0;
    // Warm every path (connections, pools, allocator arenas).
    let _ = phase(&sim.base_url(), 8, 64, tokens, 0, precise).await;
    for (_, p) in &paths {
        let _ = phase(p.url(), 8, 64, tokens, 0, precise).await;
    }
    sim.clear_log();
    let mode = if decode_ms > 0.0 {
        format!("paced sim ({decode_ms} ms per token)")
    } else {
        "zero-delay sim".to_string()
    };
    println!("# proxy overhead — {mode}, one write per chunk, {tokens} tokens/request, requests per level: max({requests}, 4×C), {rounds} round(s) per level, the proxies' order reversed each round; arrivals = kernel receive timestamps at the client");
    println!("| C | path | chunk p50 µs | chunk p99 µs | added chunk p50 / p99 µs | added TTFT p50 / p99 µs | chunk/s | ratio | CPU µs/chunk | wake-ups/chunk | syscalls/chunk | allocs/chunk |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut id = 1_000_000_000u64;
    let mut next_id = || {
        id += 1_000_000_000;
        id
    };
    // Per level, per path: (added chunk p50 µs, CPU µs per chunk, wake-ups per chunk, system
    // calls per chunk or NaN) of each round.
    let mut summary: Vec<(usize, Vec<Vec<[f64; 4]>>)> = Vec::new();
    // Why system calls cannot be counted is said once.
    let mut said_no_syscalls = false;
    let mut round_no = 0usize;
    for (&a, &conc) in apis
        .iter()
        .flat_map(|a| streams.iter().map(move |c| (a, c)))
    {
        API.store(a, std::sync::atomic::Ordering::Relaxed);
        if apis.len() > 1 && Some(&conc) == streams.first() {
            println!("| **{}** | | | | | | | | | | | |", api().0);
        }
        let total = requests.max(conc * 4);
        let mut per_path = vec![Vec::new(); paths.len()];
        for _ in 0..rounds {
            let d = measure(
                &sim,
                &sim.base_url(),
                conc,
                total,
                tokens,
                next_id(),
                precise,
            )
            .await?;
            println!(
                "| {conc} | direct | {:.1} | {:.1} | | | {:.0} | | | | | |",
                us(d.chunk.p50),
                us(d.chunk.p99),
                d.rate
            );
            // Alternate the order, so neither proxy always runs first after the direct path.
            let mut order: Vec<usize> = (0..paths.len()).collect();
            if round_no % 2 == 1 {
                order.reverse();
            }
            round_no += 1;
            for i in order {
                let (name, peer) = &mut paths[i];
                let a0 = peer.allocs()?;
                let c0 = peer.counters()?;
                let sys = match Syscalls::attach(&peer.pids()?) {
                    Ok(s) => Some(s),
                    Err(why) => {
                        if !std::mem::replace(&mut said_no_syscalls, true) {
                            eprintln!("system calls per chunk not counted: {why}");
                        }
                        None
                    }
                };
                let p = measure(&sim, peer.url(), conc, total, tokens, next_id(), precise).await?;
                let c = peer.counters()?.since(c0);
                let syscalls = sys.map(|s| s.count());
                let allocs = match (a0, peer.allocs()?) {
                    (Some(a0), Some(a1)) => Some(a1 - a0),
                    _ => None,
                };
                let per = |n: u64| n as f64 / p.events.max(1) as f64;
                let sys_per = syscalls.map_or(f64::NAN, per);
                println!(
                    "| {conc} | {name} | {:.1} | {:.1} | {:.1} / {:.1} | {:.1} / {:.1} | {:.0} | {:.3} | {:.2} | {:.2} | {} | {} |",
                    us(p.chunk.p50),
                    us(p.chunk.p99),
                    us(p.chunk.p50 - d.chunk.p50),
                    us(p.chunk.p99 - d.chunk.p99),
                    us(p.ttft.p50 - d.ttft.p50),
                    us(p.ttft.p99 - d.ttft.p99),
                    p.rate,
                    p.rate / d.rate,
                    us(per(c.cpu_ns)),
                    per(c.wakeups),
                    dash_or(sys_per),
                    allocs.map_or("-".into(), |a| format!("{:.3}", per(a))),
                );
                per_path[i].push([
                    us(p.chunk.p50 - d.chunk.p50),
                    us(per(c.cpu_ns)),
                    per(c.wakeups),
                    sys_per,
                ]);
            }
        }
        summary.push((conc, per_path));
    }
    // Each path beside nginx (the last path when `--nginx`): medians over the rounds.
    if peers.nginx && paths.len() > 1 {
        let ng = paths.len() - 1;
        println!("\n# beside nginx — medians over {rounds} round(s); ratio = path ÷ nginx (below 1: cheaper than nginx)");
        println!("| C | path | added chunk p50 µs (nginx) | ratio | CPU µs/chunk (nginx) | ratio | wake-ups/chunk (nginx) | syscalls/chunk (nginx) |");
        println!("|---|---|---|---|---|---|---|---|");
        for (conc, per_path) in &summary {
            let med = |v: &[[f64; 4]], k: usize| {
                let mut x: Vec<f64> = v.iter().map(|r| r[k]).collect();
                x.sort_by(f64::total_cmp);
                x[x.len() / 2]
            };
            for (i, (name, _)) in paths.iter().enumerate().take(ng) {
                let (o, n) = (&per_path[i], &per_path[ng]);
                println!(
                    "| {conc} | {name} | {:.1} ({:.1}) | {:.2} | {:.2} ({:.2}) | {:.2} | {:.2} ({:.2}) | {} ({}) |",
                    med(o, 0),
                    med(n, 0),
                    med(o, 0) / med(n, 0),
                    med(o, 1),
                    med(n, 1),
                    med(o, 1) / med(n, 1),
                    med(o, 2),
                    med(n, 2),
                    dash_or(med(o, 3)),
                    dash_or(med(n, 3)),
                );
            }
        }
    }
    let Some((_, Peer::Ours(mut px))) = paths.into_iter().next() else {
        anyhow::bail!("the first path is the proxy");
    };
    if !extras {
        return Ok(());
    }
    // Marginal allocations per chunk: same requests, long vs short streams, through the proxy.
    // `ALLOC_STREAMS=short,long` changes the two lengths (e.g. 1024,4096: growth that is per
    // request, not per chunk, no longer shows).
    let (short, long) = std::env::var("ALLOC_STREAMS")
        .ok()
        .and_then(|v| {
            let (a, b) = v.split_once(',')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .unwrap_or((16u64, 1024u64));
    let n = 128;
    let a0 = px.allocs()?;
    let (s_seen, _) = phase(&px.url, 16, n, short, next_id(), false).await;
    let a1 = px.allocs()?;
    let (l_seen, _) = phase(&px.url, 16, n, long, next_id(), false).await;
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
    let px = ChildProxy::spawn(&paced.base_url(), "direct", peers.pin, &[])?;
    let _ = phase(&px.url, 4, 8, 4, next_id(), false).await;
    let rss0 = px.rss_kib()?;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(held);
    let addr: std::net::SocketAddr = px.url.trim_start_matches("http://").parse()?;
    let mut bodies = Vec::new();
    let b = body(300);
    for i in 0..held {
        let (tx, b) = (tx.clone(), b.clone());
        bodies.push(tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
            s.set_nodelay(true).ok()?;
            let head = format!("POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\nx-session-id: held-{i}\r\ncontent-length: {}\r\n\r\n", b.len());
            s.write_all(head.as_bytes()).await.ok()?;
            s.write_all(&b).await.ok()?;
            let mut buf = vec![0u8; 16 * 1024];
            let _ = tokio::io::AsyncReadExt::read(&mut s, &mut buf).await;
            let _ = tx.send(()).await;
            while tokio::io::AsyncReadExt::read(&mut s, &mut buf).await.ok()? > 0 {}
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
    Ok(())
}
