//! A running proxy: [`Proxy::start`] binds and serves until [`Proxy::shutdown`] drains it and
//! reports what became of every request ([`ShutdownReport`]); [`run`] is `tokentap proxy`.

use crate::config::Config;
use crate::ledger::Ledger;
use crate::records::{Writer, WriterConfig};
use crate::shared::Shared;
use crate::workers::Workers;
use crate::{config, ledger, metrics, records, server, sessions, tokens, upstream};
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
    /// A listener could not bind.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The system's error.
        source: std::io::Error,
    },
    /// The upstreams are unusable.
    #[error(transparent)]
    Upstream(#[from] upstream::UpstreamError),
    /// The listener's TLS could not be set up.
    #[error("TLS {what}: {why}")]
    Tls {
        /// The file or step.
        what: String,
        /// Why.
        why: String,
    },
    /// The records directory is unusable.
    #[error("{0}")]
    Records(#[from] records::DirError),
    /// The serving threads could not start.
    #[error("the serving threads: {0}")]
    Workers(std::io::Error),
    /// The tokenizer stage's threads could not start.
    #[error("the tokenizer stage: {0}")]
    TokenStage(std::io::Error),
    /// `--tokenizer` could not be loaded.
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
    workers: Option<Arc<Workers>>,
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
        let threads = cfg.serving_threads();
        let shared = shared(cfg)?;
        // hyper-util's client (TLS and h2 upstreams, or `--upstream-client hyper`) arms its
        // connect timeout with `tokio::time` on the serving thread.
        let hyper_client = shared
            .upstreams
            .list
            .iter()
            .any(|u| !shared.sender.direct_for(u));
        let workers = Arc::new(Workers::start(threads, hyper_client).map_err(StartError::Workers)?);
        let (stop_tx, stop_rx) = oneshot::channel();
        let accept = tokio::spawn(server::accept_loop(
            listener,
            shared.clone(),
            tls,
            workers.clone(),
            stop_rx,
        ));
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
            workers: Some(workers),
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

    /// The admin listener's address (`/health`, `/metrics`, `/sessions`).
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

    /// Waits until every record handed to the writer so far is written (the writer takes
    /// records once per tick under load): then [`Proxy::records`] holds them all.
    pub async fn flush_records(&self) {
        self.shared.ledger.writer.flush().await;
    }

    /// Records kept in memory (needs `Config::keep_records`), as far as the writer has taken
    /// them ([`Proxy::flush_records`] first for all of them).
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
        // The accept loop has ended, so this is the last handle on the serving threads.
        if let Some(w) = self.workers.take().and_then(Arc::into_inner) {
            w.stop().await;
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
    let upstreams = upstream::Upstreams::new(
        &cfg.upstreams,
        cfg.max_upstream_connections,
        cfg.serving_threads(),
    )?;
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
