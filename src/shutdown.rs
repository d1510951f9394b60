//! The shutdown signal every long-running subcommand receives: Ctrl-C or SIGTERM, whichever
//! comes first.
//!
//! The handlers are registered when [`signal`] is called (inside the runtime, before the command
//! starts), not when its future is first polled: a SIGTERM that arrives between a server's
//! "listening on" line and its first await is then a clean stop, not the default action's kill.

use std::future::Future;

/// Registers the SIGINT and SIGTERM handlers now; the future resolves on the first of them.
pub fn signal() -> impl Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let term = signal(SignalKind::terminate()).ok();
        let int = signal(SignalKind::interrupt()).ok();
        async move {
            match (term, int) {
                (Some(mut term), Some(mut int)) => {
                    tokio::select! {
                        _ = int.recv() => {}
                        _ = term.recv() => {}
                    }
                }
                (Some(mut term), None) => {
                    term.recv().await;
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
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
