//! The shutdown signal every long-running subcommand receives: Ctrl-C (SIGINT), SIGTERM or
//! SIGHUP, whichever comes first.
//!
//! SIGHUP is what a closed terminal or a dropped SSH session sends. Its default action kills the
//! process at once, losing what is in flight (records, summaries, a sweep's state); here it is
//! the same clean stop as SIGTERM: everything recorded is written and the command exits 130.
//! (Carrying on instead would leave a run nobody can stop with the terminal gone; `nohup` or
//! a service manager is the way to outlive the session.)
//!
//! The handlers are registered when [`signal`] is called (inside the runtime, before the command
//! starts), not when its future is first polled: a signal that arrives between a server's
//! "listening on" line and its first await is then a clean stop, not the default action's kill.

use std::future::Future;

/// Registers the SIGINT, SIGTERM and SIGHUP handlers now; the future resolves on the first.
pub fn signal() -> impl Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, Signal, SignalKind};
        async fn recv(s: &mut Option<Signal>) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        let mut int = signal(SignalKind::interrupt()).ok();
        let mut term = signal(SignalKind::terminate()).ok();
        let mut hup = signal(SignalKind::hangup()).ok();
        async move {
            if int.is_none() && term.is_none() && hup.is_none() {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
            tokio::select! {
                _ = recv(&mut int) => {}
                _ = recv(&mut term) => {}
                _ = recv(&mut hup) => {}
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
