//! The data path's timers, kept off the serving threads: on one thread of their own.
//!
//! A serving thread's runtime has no timer driver ([`crate::workers`]): with one, every park of
//! the event loop — once per forwarded chunk at a real engine's pace — locked the timer wheel,
//! looked for its next deadline, read the clock and processed the wheel again after the wait,
//! for timers that almost never fire (a request's header-read, queue and upstream timeouts, a
//! response's idle timeout). Here a timer is created on the timer thread's runtime instead
//! ([`sleep`], [`timeout`], [`Timer`] for hyper) and polled from the serving thread as before:
//! arming and disarming it take the timer wheel's lock, firing wakes the task through its waker.
//!
//! The timer thread keeps one timer of its own armed [`PACE`] ahead, so that arming a
//! request's timer (30 s and more by default) never has to wake the timer thread to shorten its
//! wait: it wakes once per [`PACE`], and when a timer fires.

use hyper_util::rt::TokioTimer;
use std::future::IntoFuture;
use std::pin::Pin;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::runtime::Handle;

/// How often the timer thread wakes with nothing to fire: shorter than every timeout a request
/// arms by default (the shortest is the 5 s connect timeout).
pub const PACE: Duration = Duration::from_secs(1);

static TIMERS: OnceLock<Handle> = OnceLock::new();

/// The timer thread's runtime, started on first use; it runs as long as the process.
fn handle() -> &'static Handle {
    TIMERS.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("the timer thread's runtime starts");
        let h = rt.handle().clone();
        std::thread::Builder::new()
            .name("tokentap-timers".into())
            .spawn(move || {
                rt.block_on(async {
                    loop {
                        tokio::time::sleep(PACE).await;
                    }
                })
            })
            .expect("the timer thread starts");
        h
    })
}

/// `tokio::time::sleep` on the timer thread, pollable from any thread.
pub fn sleep(d: Duration) -> tokio::time::Sleep {
    let _on = handle().enter();
    tokio::time::sleep(d)
}

/// `tokio::time::timeout` on the timer thread, pollable from any thread.
pub fn timeout<F: IntoFuture>(d: Duration, f: F) -> tokio::time::Timeout<F::IntoFuture> {
    let _on = handle().enter();
    tokio::time::timeout(d, f)
}

/// hyper's timer (header-read timeout, h2 keep-alive), on the timer thread.
#[derive(Clone, Debug, Default)]
pub struct Timer;

// hyper's trait takes `std::time::Instant`s; tokio's timer converts them as it does its own.
#[allow(clippy::disallowed_types)]
impl hyper::rt::Timer for Timer {
    fn sleep(&self, d: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        let _on = handle().enter();
        TokioTimer::new().sleep(d)
    }

    fn sleep_until(&self, at: std::time::Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        let _on = handle().enter();
        TokioTimer::new().sleep_until(at)
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, at: std::time::Instant) {
        let _on = handle().enter();
        TokioTimer::new().reset(sleep, at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A runtime with no timer driver (a serving thread's: I/O only) sleeps and times out
    /// through the timer thread; `tokio::time::sleep` there would panic.
    #[test]
    fn timers_work_on_a_runtime_without_a_timer_driver() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        rt.block_on(async {
            let t = tokio::time::Instant::now();
            sleep(Duration::from_millis(20)).await;
            assert!(t.elapsed() >= Duration::from_millis(20));
            let never = std::future::pending::<()>();
            assert!(timeout(Duration::from_millis(10), never).await.is_err());
            assert_eq!(timeout(Duration::from_secs(10), async { 7 }).await, Ok(7));
            let h = hyper::rt::Timer::sleep(&Timer, Duration::from_millis(10));
            h.await;
        });
    }
}
