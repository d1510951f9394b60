//! # tokentap-proxy — the measurement proxy
//!
//! A transparent reverse proxy that sits between any OpenAI-compatible client and server and
//! timestamps every streamed chunk on its own side of each socket, per session. Clients trust
//! their own numbers and engines theirs; neither can be checked. The wire can: the proxy sees
//! what the client gets, and when. That only holds if the proxy is transparent (bytes through
//! untouched, hop-by-hop headers handled as RFC 9110 says) and costs far less than it measures
//! (decode intervals on an H200 are a few ms; the proxy adds microseconds — see the README).
//!
//! ## Design overview
//!
//! ```text
//!   client ──► server::accept_loop ──► service::handle ──► upstream::Sender ──► server(s)
//!                 (TLS, h1/h2, drain)      │  Tap (per-request state)   direct (http://: own
//!                                          │  RequestTap (sniff body)    HTTP/1.1, pooled)
//!                                          │                          hyper_client
//!                                          │                           (https://, h2c://)
//!   client ◄──────────── hyper ◄──── meter::MeteredBody ◄──── direct::H1Body | hyper Incoming
//!                                          │ finish / drop: exactly one record per request
//!                                          ▼
//!        ledger::Ledger: records::Writer (JSONL thread), sessions::Sessions, metrics::Metrics
//!                                                          ▲                  ▲
//!                                                admin listener: /sessions, /metrics, /health
//! ```
//!
//! ## Layout
//! - [`config`]: `Opts` (clap, env `TOKENTAP_PROXY_*`) and the validated `Config`.
//! - [`server`]: listeners, TLS, graceful drain with a deadline.
//! - [`service`]: the request path, one function a step — identify, limits, headers, body,
//!   failover over the replicas, the proxy's own error answers.
//! - [`shared`]: the state every request shares; [`route`]: the measured routes.
//! - [`ledger`]: where a finished request goes (writer, sessions, metrics, tokenizer stage) and
//!   the in-flight count; with a replica's `Claim`, all a `Tap` holds of the server.
//! - [`meter`]: `Tap` and `MeteredBody`, the per-chunk hot path and the record at the end.
//! - [`sniff`]: reads `model`/`stream`/`stream_options`/messages without holding the body back.
//! - [`inject`]: `--inject-usage` request rewrite and response stripping.
//! - [`upstream`]: the upstream side by concept — `replica` (replica set, rendezvous hashing, a
//!   request's claim), `direct` (the HTTP/1.1 client for `http://` upstreams whose response body
//!   is read by the task that writes it to the client: one wake-up per chunk, reads coalesced
//!   into one write) and its `pool`, `hyper_client` (hyper-util's pooled clients for `https://`
//!   and `h2c://`), `tls`; `Sender` picks the client for one attempt.
//! - [`tokens`]: `--tokenizer`: the reference's counts of each finished request, off the hot
//!   path, before its record reaches the writer.
//! - [`records`], [`sessions`], [`metrics`], [`admin`], [`error`], [`headers`], [`content`].
//!
//! ## Measured cost
//! Per chunk in-process: ≈1.6 µs for the metered body (framer + timeline + chunk parse), zero
//! allocations on the steady path (`benches/chunk.rs`). End to end on a 2-vCPU VM, side by side
//! with nginx: about nginx's CPU per chunk (5–11 µs under load) and chunk rate, ≈47 KiB per
//! in-flight stream (`examples/proxy_overhead.rs`; the tables: docs/benchmarks.md).
//!
//! ## Clocks
//! Every instant is raw `CLOCK_MONOTONIC` ns ([`tokentap_core::clock::now`]); a record's
//! `start_mono_ns` is when hyper handed the request head to the service, its `anchor` reads the
//! wall clock at the same moment, and every other `*_ns` field is an offset from the start:
//! `forwarded_ns` (request sent upstream), `headers_ns` (response head back from upstream),
//! `ttfb_ns`/`ttft_ns`/chunk offsets (frame handed to hyper for the client), `e2e_ns` (last byte).
#![forbid(unsafe_code)]

pub mod admin;
pub mod config;
pub mod content;
pub mod error;
pub mod headers;
pub mod inject;
pub mod ledger;
pub mod meter;
pub mod metrics;
pub mod records;
pub mod route;
pub mod server;
pub mod service;
pub mod sessions;
pub mod shared;
pub mod sniff;
pub mod tokens;
pub mod upstream;

pub use config::Config;

use ledger::Ledger;
use records::{Writer, WriterConfig};
use shared::Shared;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokentap_core::record::TurnRecord;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Upstream(#[from] upstream::UpstreamError),
    #[error("TLS {what}: {why}")]
    Tls { what: String, why: String },
    #[error("{0}")]
    Records(#[from] records::DirError),
    #[error("the tokenizer stage: {0}")]
    TokenStage(std::io::Error),
    #[error("--tokenizer: {0}")]
    Tokenizer(String),
}

/// How a shutdown went. `seen == written + dropped + failed` once every request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownReport {
    /// All streams finished within the grace period (false: the rest were cut).
    pub drained: bool,
    /// Requests the proxy saw.
    pub seen: u64,
    /// Records on disk (or counted, without `--records`).
    pub written: u64,
    /// Records lost because the writer's queue was full.
    pub dropped: u64,
    /// Records lost to a write error (cut back out of the file: no torn line).
    pub failed: u64,
    /// The last write error.
    pub last_error: Option<String>,
}

impl ShutdownReport {
    /// Records lost, dropped or failed.
    pub fn lost(&self) -> u64 {
        self.dropped + self.failed
    }
}

/// A running proxy.
pub struct Proxy {
    addr: SocketAddr,
    admin_addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<Duration>>,
    accept: JoinHandle<server::DrainReport>,
    admin_stop: CancellationToken,
    admin: JoinHandle<()>,
    sweeper: JoinHandle<()>,
}

impl Proxy {
    /// Binds both listeners and starts serving.
    pub async fn start(cfg: Config) -> Result<Proxy, StartError> {
        let tls = match &cfg.tls() {
            Some((c, k)) => Some(server::tls_acceptor(c, k)?),
            None => None,
        };
        let listener = TcpListener::bind(cfg.listen)
            .await
            .map_err(|source| StartError::Bind {
                addr: cfg.listen,
                source,
            })?;
        let admin_listener =
            TcpListener::bind(cfg.admin)
                .await
                .map_err(|source| StartError::Bind {
                    addr: cfg.admin,
                    source,
                })?;
        let bound = |l: &TcpListener, a: SocketAddr| {
            l.local_addr()
                .map_err(|source| StartError::Bind { addr: a, source })
        };
        let addr = bound(&listener, cfg.listen)?;
        let admin_addr = bound(&admin_listener, cfg.admin)?;
        let ttl = cfg.session_ttl;
        let shared = shared(cfg)?;
        let (stop_tx, stop_rx) = oneshot::channel();
        let accept = tokio::spawn(server::accept_loop(listener, shared.clone(), tls, stop_rx));
        let admin_stop = CancellationToken::new();
        let admin = tokio::spawn(server::admin_loop(
            admin_listener,
            shared.ledger.clone(),
            admin_stop.clone(),
        ));
        let sw = shared.clone();
        let keepalive = shared.cfg.upstream_keepalive;
        let sweeper = tokio::spawn(async move {
            // Expired sessions, and idle upstream connections past their keep-alive (closed
            // by the server by now, so ours would sit in CLOSE_WAIT until the next reuse).
            let every = (ttl / 4)
                .min(keepalive)
                .clamp(Duration::from_millis(100), Duration::from_secs(30));
            loop {
                tokio::time::sleep(every).await;
                sw.ledger.sessions.sweep();
                for up in &sw.upstreams.list {
                    up.pool.sweep(keepalive);
                }
            }
        });
        Ok(Proxy {
            addr,
            admin_addr,
            shared,
            stop: Some(stop_tx),
            accept,
            admin_stop,
            admin,
            sweeper,
        })
    }

    /// The client-facing address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR` (or `https://` with TLS).
    pub fn base_url(&self) -> String {
        let scheme = if self.shared.cfg.tls().is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// Records written so far.
    pub fn records_written(&self) -> u64 {
        self.shared
            .ledger
            .writer
            .counts
            .written
            .load(Ordering::Relaxed)
    }

    /// Records kept in memory (needs `Config::keep_records`).
    pub fn records(&self) -> Vec<TurnRecord> {
        self.shared.ledger.writer.subscribe().borrow().clone()
    }

    /// Waits until at least `n` records are kept in memory (needs `Config::keep_records`).
    pub async fn wait_records(&self, n: usize) -> Vec<TurnRecord> {
        let mut rx = self.shared.ledger.writer.subscribe();
        let got = rx.wait_for(|v| v.len() >= n).await.map(|v| v.clone());
        got.unwrap_or_else(|_| rx.borrow().clone())
    }

    /// The Prometheus registry's current text (what `/metrics` serves).
    pub fn metrics_text(&self) -> String {
        String::from_utf8_lossy(&self.shared.ledger.metrics.render()).into_owned()
    }

    /// Stops accepting, lets in-flight requests finish for up to `grace`, cuts the rest (they
    /// are recorded `cancelled`), flushes every record, stops the admin listener.
    pub async fn shutdown(mut self, grace: Duration) -> ShutdownReport {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(grace);
        }
        let drained = match (&mut self.accept).await {
            Ok(r) => r.drained,
            Err(_) => false,
        };
        // Every tap ends when its connection ends; cut connections end within a scheduler turn.
        // Bounded anyway, so a stuck task cannot hold the exit hostage.
        let ledger = &self.shared.ledger;
        let _ = tokio::time::timeout(Duration::from_secs(10), ledger.idle()).await;
        if let Some(t) = &ledger.tokens {
            t.drain().await;
            let skipped = t.skipped.load(Ordering::Relaxed);
            if skipped > 0 {
                tracing::warn!(
                    skipped,
                    "records written without token counts: the tokenizer queue was full"
                );
            }
        }
        ledger.writer.flush().await;
        self.admin_stop.cancel();
        let _ = (&mut self.admin).await;
        self.sweeper.abort();
        let c = &self.shared.ledger.writer.counts;
        ShutdownReport {
            drained,
            seen: self.shared.seen.load(Ordering::Relaxed),
            written: c.written.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            last_error: c.last_error(),
        }
    }
}

/// Builds the state every request shares (clients, writer thread, metrics, sessions) without
/// any listener: [`Proxy::start`] uses it, and so do benches that drive a [`meter::MeteredBody`]
/// directly. Must be called inside a tokio runtime.
pub fn shared(cfg: Config) -> Result<Arc<Shared>, StartError> {
    let upstreams = upstream::Upstreams::new(&cfg.upstreams, cfg.max_upstream_connections)?;
    let needs_roots = cfg.upstreams.iter().any(|u| u.starts_with("https://"));
    let clients = upstream::Clients::new(&upstream::ClientConfig {
        connect_timeout: cfg.connect_timeout,
        pool_idle_timeout: cfg.upstream_keepalive,
        extra_ca: cfg.upstream_ca.clone(),
        native_roots: needs_roots,
    })?;
    let writer = Writer::start(WriterConfig {
        dir: cfg.records_dir.clone(),
        max_bytes: cfg.records_max_bytes,
        keep: cfg.keep_records,
    })?;
    let tokens = match &cfg.tokenizer {
        Some(dir) => {
            let tok = tokentap_mlperf::RefTokenizer::load(dir)
                .map_err(|e| StartError::Tokenizer(e.to_string()))?;
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            Some(
                tokens::Stage::start(Arc::new(tok), writer.clone(), (cores / 2).clamp(1, 4))
                    .map_err(StartError::TokenStage)?,
            )
        }
        None => None,
    };
    let sessions = sessions::Sessions::new(sessions::Limits::of(&cfg));
    let metrics = metrics::Metrics::new();
    // Every known label set exported as 0 from the start, so a panel shows 0, not "No data".
    for u in &upstreams.list {
        metrics.upstream_requests.with_label_values(&[&u.name]);
        for kind in ["connect", "reset", "timeout", "stale_connection", "busy"] {
            metrics.upstream_errors.with_label_values(&[&u.name, kind]);
        }
    }
    let sender = upstream::Sender {
        clients,
        direct: cfg.upstream_client == config::UpstreamClient::Direct,
        connect_timeout: cfg.connect_timeout,
        keepalive: cfg.upstream_keepalive,
        timeout: cfg.upstream_timeout,
    };
    let ledger = Ledger::new(
        &cfg,
        ledger::Parts {
            writer,
            sessions,
            metrics,
            tokens,
        },
    );
    Ok(Arc::new(Shared {
        cfg,
        upstreams,
        sender,
        ledger: Arc::new(ledger),
        seen: AtomicU64::new(0),
    }))
}

impl Drop for Proxy {
    /// Dropping a proxy without [`Proxy::shutdown`] stops it at once: the accept loop sees its
    /// stop channel close and cuts every connection (recorded `cancelled`), the admin listener
    /// and the session sweeper end.
    fn drop(&mut self) {
        self.admin_stop.cancel();
        self.sweeper.abort();
    }
}

/// `tokentap proxy`: starts, prints `listening on http://ADDR` and `admin on http://ADDR` as
/// the first two stdout lines, serves until `shutdown` resolves, then drains within `--grace`,
/// says on stderr what it saw and wrote, and fails (exit 1) when any record was lost.
pub async fn run(cfg: Config, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let grace = cfg.grace;
    let proxy = Proxy::start(cfg).await?;
    // Status lines: a closed stdout (a supervisor that stopped reading) must not stop the
    // proxy, so write errors are ignored rather than panicking as `println!` would.
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening on {}", proxy.base_url());
        let _ = writeln!(out, "admin on http://{}", proxy.admin_addr());
        let _ = out.flush();
    }
    shutdown.await;
    let r = proxy.shutdown(grace).await;
    tracing::info!(
        drained = r.drained,
        seen = r.seen,
        written = r.written,
        dropped = r.dropped,
        failed = r.failed,
        "proxy stopped"
    );
    eprintln!(
        "proxy stopped: {} requests seen, {} records written, {} dropped, {} failed{}",
        r.seen,
        r.written,
        r.dropped,
        r.failed,
        if r.drained {
            ""
        } else {
            " (streams cut at the grace deadline)"
        }
    );
    if r.lost() > 0 {
        anyhow::bail!(
            "{} of {} records were lost: {} dropped (the writer's queue was full), {} not written ({})",
            r.lost(),
            r.seen,
            r.dropped,
            r.failed,
            r.last_error.as_deref().unwrap_or("no write error")
        );
    }
    Ok(())
}
