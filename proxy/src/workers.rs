//! The serving threads: one single-threaded runtime per thread (`--threads`, one per core by
//! default), each the event loop of the client connections given to it and of the upstream
//! connections those open.
//!
//! ```text
//!  accept loop (the caller's runtime) ──► the thread with the fewest open connections
//!                                             │
//!         client socket ◄── hyper ◄── MeteredBody ◄── H1Body ◄── upstream socket
//!         (every chunk: one wake-up of this thread, no hand-over to another)
//! ```
//!
//! This is nginx's layout: a chunk arrives, is parsed and is written on the thread whose
//! `epoll_wait` saw it. With one multi-threaded runtime instead, a burst of chunks woke one
//! worker, which then woke the other through a futex to steal half of them: a quarter of a
//! futex call per chunk and a second wake-up, measured in `examples/proxy_overhead.rs`
//! (docs/benchmarks.md, "Proxy, end to end").
//!
//! The runtimes have I/O and no timers: a request's timers live on the timer thread
//! ([`crate::timers`]), so a park of the event loop is an `epoll_wait` with no timer wheel
//! (16 % less CPU per chunk at 1 paced stream, docs/benchmarks.md, "Timers off the serving
//! threads").
//!
//! A thread knows its own number ([`slot`]), so state that holds sockets is kept per thread:
//! an upstream connection is taken from, and given back to, the pool of the thread that
//! opened it ([`crate::upstream::pool::Pool`]), so its readiness is always reported to the
//! thread that reads it.

use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::runtime::Handle;
use tokio::sync::oneshot;

thread_local! {
    /// 0 on any other thread; k + 1 on serving thread k.
    static SLOT: Cell<usize> = const { Cell::new(0) };
}

/// This thread's number among the serving threads plus one; 0 for any other thread (the
/// caller's runtime, a test's). Per-thread state is indexed by it.
pub fn slot() -> usize {
    SLOT.with(Cell::get)
}

/// One serving thread.
struct Worker {
    handle: Handle,
    /// Client connections it serves now.
    open: Arc<AtomicUsize>,
    stop: Option<oneshot::Sender<()>>,
    exited: Option<oneshot::Receiver<()>>,
}

/// The serving threads.
pub struct Workers {
    list: Vec<Worker>,
    /// Where the search for the least busy thread starts (turns, so ties spread).
    next: AtomicUsize,
}

/// Ends a connection's count on its thread when the connection's task ends (or is aborted).
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Workers {
    /// `n` serving threads (at least one), each running its runtime until [`Workers::stop`]
    /// or until this is dropped. Their runtimes have no timer driver ([`crate::timers`] has the
    /// data path's timers) unless `time`: hyper-util's client (TLS and h2 upstreams,
    /// `--upstream-client hyper`) arms its connect timeout with `tokio::time` on the thread that
    /// connects.
    pub fn start(n: usize, time: bool) -> std::io::Result<Workers> {
        let n = n.max(1);
        let mut list = Vec::with_capacity(n);
        for k in 0..n {
            let mut b = tokio::runtime::Builder::new_current_thread();
            b.enable_io();
            if time {
                b.enable_time();
            }
            let rt = b.build()?;
            let handle = rt.handle().clone();
            let (stop, stopped) = oneshot::channel::<()>();
            let (exit_tx, exited) = oneshot::channel();
            std::thread::Builder::new()
                .name(format!("tokentap-serve-{k}"))
                .spawn(move || {
                    SLOT.with(|s| s.set(k + 1));
                    let _ = rt.block_on(stopped);
                    // Whatever is still running is dropped here, on its own thread: a response
                    // body cut this way records its request `cancelled`.
                    drop(rt);
                    let _ = exit_tx.send(());
                })?;
            list.push(Worker {
                handle,
                open: Arc::default(),
                stop: Some(stop),
                exited: Some(exited),
            });
        }
        Ok(Workers {
            list,
            next: AtomicUsize::new(0),
        })
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Never: there is at least one.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Runs a connection's future on the thread with the fewest open connections. The future
    /// is first polled there, so what it registers (its sockets, its timers) belongs to that
    /// thread's runtime.
    pub fn serve<F>(&self, fut: F) -> tokio::task::JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let n = self.list.len();
        let w = (0..n)
            .map(|i| &self.list[(start + i) % n])
            .min_by_key(|w| w.open.load(Ordering::Relaxed))
            .unwrap_or(&self.list[0]);
        w.open.fetch_add(1, Ordering::Relaxed);
        let open = Open(w.open.clone());
        w.handle.spawn(async move {
            let _open = open;
            fut.await;
        })
    }

    /// Stops every thread, dropping what still runs there, and waits until they have.
    pub async fn stop(mut self) {
        for w in &mut self.list {
            drop(w.stop.take());
        }
        for w in &mut self.list {
            if let Some(rx) = w.exited.take() {
                let _ = rx.await;
            }
        }
    }
}
