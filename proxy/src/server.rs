//! Listeners: accepting clients (plain or TLS, HTTP/1.1 and h2), the admin port, and the drain.
//!
//! Each accepted socket gets `TCP_NODELAY` and its own task, on the serving thread with the
//! fewest open connections ([`crate::workers`]), running hyper-util's `auto`
//! connection (HTTP/1.1 or h2 by preface; over TLS, ALPN offers `h2` and `http/1.1`). Every
//! connection is watched by a [`Drain`] and tracked by a [`Tracker`]: on shutdown the
//! accept loop stops, the drain asks each connection to finish what it has in flight
//! (h1: no more keep-alive; h2: GOAWAY), and when the grace period runs out [`Tracker::cut`]
//! aborts whatever is left — which drops their response bodies, whose taps record them
//! `cancelled`. h2 streams run in tasks of their own, spawned through the same tracker.

use crate::ledger::Ledger;
use crate::service;
use crate::shared::Shared;
use crate::workers::Workers;
use dashmap::DashMap;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulConnection;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, OwnedSemaphorePermit};
use tokio::task::{AbortHandle, JoinHandle};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

/// Every task serving a client: connections, and h2 streams (hyper spawns one task per stream
/// through [`Tracker`] as its executor). On [`Tracker::cut`] they are all aborted, which drops
/// their response bodies, whose taps record them `cancelled`.
///
/// Abort handles instead of a cancellation future raced against each connection: a
/// `select!` on `CancellationToken::cancelled()` re-polls the token (a mutex) on every wake-up of
/// the connection task, i.e. per forwarded chunk; measured at ~1% of the proxy's CPU under
/// load. The registry is touched once per task start and end.
#[derive(Clone, Default)]
pub struct Tracker {
    next: Arc<AtomicU64>,
    tasks: Arc<DashMap<u64, AbortHandle>>,
    cut: Arc<AtomicBool>,
}

impl Tracker {
    /// Spawns a tracked task on this runtime (dropped at once if the cut already happened).
    pub fn spawn<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.track(fut, |f| tokio::spawn(f));
    }

    /// Spawns a tracked task on the least busy serving thread.
    pub fn spawn_on<F>(&self, workers: &Workers, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.track(fut, |f| workers.serve(f));
    }

    fn track<F>(
        &self,
        fut: F,
        spawn: impl FnOnce(Pin<Box<dyn Future<Output = ()> + Send>>) -> JoinHandle<()>,
    ) where
        F: Future<Output = ()> + Send + 'static,
    {
        if self.cut.load(Ordering::Acquire) {
            return;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let tasks = self.tasks.clone();
        let h = spawn(Box::pin(async move {
            fut.await;
            tasks.remove(&id);
        }));
        self.tasks.insert(id, h.abort_handle());
        // The task may have finished before its handle was inserted.
        if h.is_finished() {
            self.tasks.remove(&id);
        }
        // A cut racing with this spawn: make sure the new task is aborted too.
        if self.cut.load(Ordering::Acquire) {
            h.abort();
        }
    }

    /// Aborts every tracked task; later spawns are refused.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::Release);
        for e in self.tasks.iter() {
            e.value().abort();
        }
    }
}

impl<F> hyper::rt::Executor<F> for Tracker
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        self.spawn(async move {
            let _ = fut.await;
        });
    }
}

/// Accept failures (EMFILE, ENFILE, ENOBUFS): the wait before the next accept doubles from
/// 10 ms to 1 s, and the log says so once, then at most every 10 s with the count.
#[derive(Default)]
struct Backoff {
    wait: Duration,
    logged: Option<tokio::time::Instant>,
    since: u64,
}

impl Backoff {
    fn failed(&mut self, e: &std::io::Error) -> Duration {
        self.wait = (self.wait * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
        self.since += 1;
        if self
            .logged
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(10))
        {
            tracing::warn!(error = %e, failures = self.since, next_try_ms = self.wait.as_millis() as u64, "accept failed; backing off");
            self.logged = Some(tokio::time::Instant::now());
            self.since = 0;
        }
        self.wait
    }

    fn ok(&mut self) {
        self.wait = Duration::ZERO;
    }
}

/// The graceful part of a shutdown: [`Drain::run`] asks every watched connection to finish what
/// it has in flight (HTTP/1.1: no more keep-alive; h2: GOAWAY) and waits until all have ended.
///
/// hyper-util's `GracefulShutdown` does the same with a `watch` channel whose change every
/// connection re-polls each time it is polled — once per forwarded chunk, and every poll of a
/// registered waiter takes the channel's one mutex, shared by all connections on all threads.
/// Here each connection leaves its waker once per poll in a slot of its own (two uncontended
/// atomics) and reads one flag that changes once.
#[derive(Clone, Default)]
pub struct Drain(Arc<DrainState>);

#[derive(Default)]
struct DrainState {
    started: AtomicBool,
    next: AtomicU64,
    /// The watched connections' wakers, by id.
    conns: DashMap<u64, Arc<atomic_waker::AtomicWaker>>,
    /// Told when the last watched connection ends during a drain.
    idle: tokio::sync::Notify,
}

impl Drain {
    /// A place for one connection, taken when it is accepted (the drain waits for it from
    /// then on, even before it is [`Watcher::watch`]ed).
    pub fn watcher(&self) -> Watcher {
        let id = self.0.next.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(atomic_waker::AtomicWaker::new());
        self.0.conns.insert(id, slot.clone());
        Watcher {
            drain: self.clone(),
            id,
            slot,
        }
    }

    /// Starts the drain and waits until every watched connection has ended.
    pub async fn run(&self) {
        self.0.started.store(true, Ordering::Release);
        for c in self.0.conns.iter() {
            c.value().wake();
        }
        loop {
            let idle = self.0.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.0.conns.is_empty() {
                return;
            }
            idle.await;
        }
    }
}

/// One connection's place in a [`Drain`]; dropping it ends the wait for that connection.
pub struct Watcher {
    drain: Drain,
    id: u64,
    slot: Arc<atomic_waker::AtomicWaker>,
}

impl Watcher {
    /// `conn`, asked to finish gracefully once the drain starts.
    pub fn watch<C: GracefulConnection>(self, conn: C) -> Watched<C> {
        Watched {
            conn: Box::pin(conn),
            watcher: self,
            asked: false,
            waker: None,
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let d = &self.drain.0;
        d.conns.remove(&self.id);
        if d.started.load(Ordering::Acquire) && d.conns.is_empty() {
            d.idle.notify_waiters();
        }
    }
}

/// A connection watched by a [`Drain`].
pub struct Watched<C> {
    conn: Pin<Box<C>>,
    watcher: Watcher,
    /// Its graceful shutdown was asked for.
    asked: bool,
    /// The waker left in the slot.
    waker: Option<std::task::Waker>,
}

impl<C: GracefulConnection> Future for Watched<C> {
    type Output = C::Output;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let this = &mut *self;
        if !this.asked {
            // The waker first, then the flag: a drain that starts in between wakes this task.
            // (Registered again only when the task's waker changed.)
            if !this.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                this.watcher.slot.register(cx.waker());
                this.waker = Some(cx.waker().clone());
            }
            if this.watcher.drain.0.started.load(Ordering::Acquire) {
                this.asked = true;
                this.conn.as_mut().graceful_shutdown();
            }
        }
        this.conn.as_mut().poll(cx)
    }
}

/// How the drain went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainReport {
    /// Every connection finished within the grace period.
    pub drained: bool,
}

/// Accepts until `stop` delivers a grace period, then drains.
pub async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    tls: Option<TlsAcceptor>,
    workers: Arc<Workers>,
    stop: oneshot::Receiver<Duration>,
) -> DrainReport {
    let tracker = Tracker::default();
    let setup = ConnSetup::new(&tracker, &shared);
    let drain = Drain::default();
    let mut backoff = Backoff::default();
    let open = Arc::new(tokio::sync::Semaphore::new(shared.cfg.max_connections));
    tokio::pin!(stop);
    let grace = loop {
        tokio::select! {
            g = &mut stop => break g.unwrap_or(Duration::ZERO),
            acc = listener.accept() => {
                let (sock, _peer) = match acc {
                    Ok(a) => a,
                    Err(e) => {
                        // EMFILE and friends: back off (doubling to 1 s) rather than spin, and
                        // say so at most every 10 s.
                        let wait = backoff.failed(&e);
                        tokio::select! {
                            _ = tokio::time::sleep(wait) => {}
                            g = &mut stop => break g.unwrap_or(Duration::ZERO),
                        }
                        continue;
                    }
                };
                backoff.ok();
                // Over --max-connections: closed at once (an idle flood cannot starve the rest).
                let Ok(slot) = open.clone().try_acquire_owned() else {
                    shared.ledger.metrics.connections_closed.with_label_values(&["over_limit"]).inc();
                    drop(sock);
                    continue;
                };
                let _ = sock.set_nodelay(true);
                // Handed to a serving thread, where it is registered again (so its readiness
                // is reported to the thread that reads it).
                let sock = match sock.into_std() {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::debug!(error = %e, "an accepted socket could not be handed over");
                        continue;
                    }
                };
                let (setup, shared, tls, watcher) =
                    (setup.clone(), shared.clone(), tls.clone(), drain.watcher());
                tracker.spawn_on(&workers, async move {
                    let Ok(sock) = TcpStream::from_std(sock) else { return };
                    serve_connection(setup, shared, sock, tls, watcher, slot).await;
                });
            }
        }
    };
    drop(listener);
    let drained = tokio::select! {
        _ = drain.run() => true,
        _ = tokio::time::sleep(grace) => false,
    };
    if !drained {
        shared.ledger.start_cutting();
        tracker.cut();
    }
    DrainReport { drained }
}

/// What every client connection is served with: hyper's builder and the head limits.
#[derive(Clone)]
struct ConnSetup {
    builder: auto::Builder<Tracker>,
    header_timeout: Duration,
    /// hyper's hard cap on a head's bytes.
    hard_cap: usize,
    /// hyper's cap on a head's header lines.
    max_lines: usize,
}

impl ConnSetup {
    /// The HTTP/1.1 and h2 settings of `--max-header-bytes`, `--header-timeout` and
    /// `--max-concurrent-streams`, with every task spawned through `tracker`.
    fn new(tracker: &Tracker, shared: &Shared) -> ConnSetup {
        let mut builder = auto::Builder::new(tracker.clone());
        // hyper's own head limit sits above ours so oversized heads reach the service, which
        // answers 431 *and records it*; only heads beyond this hard cap are refused by hyper
        // alone.
        let hard_cap = shared.cfg.max_header_bytes.saturating_mul(2).max(64 << 10);
        const MAX_HEADER_LINES: usize = 24_576;
        let max_lines = (hard_cap / 4).clamp(100, MAX_HEADER_LINES);
        let header_timeout = shared.cfg.header_timeout;
        builder
            .http1()
            .timer(crate::timers::Timer)
            .max_buf_size(hard_cap.max(8192))
            // Any number of headers within the byte limits (hyper's default stops at 100, with
            // an empty 431 the service never sees): a header line is at least 4 bytes. Capped
            // at 24,576: hyper reserves a `HeaderMap` of that many entries, and `http`'s map
            // panics past 32,768 slots (n + n/3, rounded up to a power of two) — beyond the cap
            // hyper answers its own 431 (and the proxy records it, below).
            .max_headers(max_lines)
            // Every head within the timeout, and (hyper ≥ 1.6) the wait for the next head on a
            // kept-alive connection too: an idle connection is closed after it.
            .header_read_timeout(header_timeout)
            .keep_alive(true)
            // Each response write is copied into one buffer and sent by one `write`, not queued
            // as (chunk size, data, CRLF) for `writev`: measured beside nginx, 14 % less CPU per
            // chunk at 16 paced streams and 18 % saturated (docs/benchmarks.md).
            .writev(false);
        builder
            .http2()
            .timer(crate::timers::Timer)
            .max_header_list_size(hard_cap.min(u32::MAX as usize) as u32)
            .max_concurrent_streams(shared.cfg.max_concurrent_streams);
        ConnSetup {
            builder,
            header_timeout,
            hard_cap,
            max_lines,
        }
    }
}

/// Serves one accepted client connection (TLS first when configured) until it ends or the
/// drain closes it; holds its `--max-connections` slot meanwhile.
async fn serve_connection(
    setup: ConnSetup,
    shared: Arc<Shared>,
    sock: TcpStream,
    tls: Option<TlsAcceptor>,
    watcher: Watcher,
    slot: OwnedSemaphorePermit,
) {
    let _slot = slot;
    let ConnSetup {
        builder,
        header_timeout,
        hard_cap,
        max_lines,
    } = setup;
    // A connection that sends nothing is closed at the header timeout: hyper's HTTP/1-or-h2
    // detection would wait for its first bytes forever.
    let mut first = [0u8; 1];
    match crate::timers::timeout(header_timeout, sock.peek(&mut first)).await {
        Ok(Ok(n)) if n > 0 => {}
        Ok(_) => return,
        Err(_) => {
            shared
                .ledger
                .metrics
                .connections_closed
                .with_label_values(&["header_timeout"])
                .inc();
            return;
        }
    }
    let svc = {
        let shared = shared.clone();
        service_fn(move |req| service::handle(shared.clone(), req))
    };
    match tls {
        Some(acc) => match crate::timers::timeout(header_timeout, acc.accept(sock)).await {
            Ok(Ok(s)) => {
                let conn = builder.serve_connection(TokioIo::new(s), svc).into_owned();
                if let Err(e) = watcher.watch(conn).await {
                    head_refused(&shared, &*e, hard_cap, max_lines);
                }
            }
            Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
            Err(_) => {
                shared
                    .ledger
                    .metrics
                    .connections_closed
                    .with_label_values(&["tls_timeout"])
                    .inc();
            }
        },
        None => {
            let conn = builder
                .serve_connection(TokioIo::new(sock), svc)
                .into_owned();
            if let Err(e) = watcher.watch(conn).await {
                head_refused(&shared, &*e, hard_cap, max_lines);
            }
        }
    }
}

/// A connection that ended because hyper refused a head too large to parse (past `cap` bytes or
/// `lines` header lines): hyper answered its own empty 431; the request is recorded here.
fn head_refused(shared: &Shared, e: &(dyn std::error::Error + 'static), cap: usize, lines: usize) {
    if e.downcast_ref::<hyper::Error>()
        .is_some_and(hyper::Error::is_parse_too_large)
    {
        service::refused_unread(shared, tokentap_core::clock::Anchor::now(), cap, lines);
    }
}

/// Serves the admin endpoints until `stop` fires.
pub async fn admin_loop(listener: TcpListener, ledger: Arc<Ledger>, stop: CancellationToken) {
    let builder = hyper::server::conn::http1::Builder::new();
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            acc = listener.accept() => {
                let Ok((sock, _)) = acc else { continue };
                let _ = sock.set_nodelay(true);
                let ledger = ledger.clone();
                let builder = builder.clone();
                let stop = stop.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req| crate::admin::handle(ledger.clone(), req));
                    let conn = builder.serve_connection(TokioIo::new(sock), svc);
                    tokio::select! {
                        _ = conn => {}
                        _ = stop.cancelled() => {}
                    }
                });
            }
        }
    }
}

/// Builds the TLS acceptor for `--tls-cert/--tls-key`.
pub fn tls_acceptor(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<TlsAcceptor, crate::StartError> {
    use rustls_pki_types::pem::PemObject;
    let tls_err = |what: &str, p: &std::path::Path, e: String| crate::StartError::Tls {
        what: format!("{what} {}", p.display()),
        why: e,
    };
    let chain = crate::upstream::read_certs(cert).map_err(|e| tls_err("certificate", cert, e))?;
    let key = rustls_pki_types::PrivateKeyDer::from_pem_file(key)
        .map_err(|e| tls_err("key", key, e.to_string()))?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(crate::upstream::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err("protocol versions for", cert, e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| tls_err("certificate/key pair", cert, e.to_string()))?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(cfg)))
}
