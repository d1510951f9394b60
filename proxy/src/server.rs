//! Listeners: accepting clients (plain or TLS, HTTP/1.1 and h2), the admin port, and the drain.
//!
//! Each accepted socket gets `TCP_NODELAY` and its own task running hyper-util's `auto`
//! connection (HTTP/1.1 or h2 by preface; over TLS, ALPN offers `h2` and `http/1.1`). Every
//! connection is watched by a [`GracefulShutdown`] and also races a "cut" token: on shutdown the
//! accept loop stops, graceful shutdown asks each connection to finish what it has in flight
//! (h1: no more keep-alive; h2: GOAWAY), and when the grace period runs out the cut token drops
//! whatever is left — which drops their response bodies, whose taps record them `cancelled`. h2
//! streams run in tasks of their own; [`CutExecutor`] makes those obey the cut token too.

use crate::service::{self, Shared};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

/// Spawns futures (h2 streams) so that they end when the cut token fires.
#[derive(Clone)]
pub struct CutExecutor {
    cut: CancellationToken,
}

impl<F> hyper::rt::Executor<F> for CutExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        let cut = self.cut.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = fut => {}
                _ = cut.cancelled() => {}
            }
        });
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
    stop: oneshot::Receiver<Duration>,
    cut: CancellationToken,
) -> DrainReport {
    let mut builder = auto::Builder::new(CutExecutor { cut: cut.clone() });
    // hyper's own head limit sits above ours so oversized heads reach the service, which
    // answers 431 *and records it*; only heads beyond this hard cap are refused by hyper alone.
    let hard_cap = shared.cfg.max_header_bytes.saturating_mul(2).max(64 << 10);
    builder
        .http1()
        .timer(TokioTimer::new())
        .max_buf_size(hard_cap.max(8192))
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(hard_cap.min(u32::MAX as usize) as u32)
        .max_concurrent_streams(4096);
    let graceful = GracefulShutdown::new();
    tokio::pin!(stop);
    let grace = loop {
        tokio::select! {
            g = &mut stop => break g.unwrap_or(Duration::ZERO),
            acc = listener.accept() => {
                let (sock, _peer) = match acc {
                    Ok(a) => a,
                    Err(e) => {
                        // EMFILE and friends: back off briefly rather than spin.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let _ = sock.set_nodelay(true);
                let shared = shared.clone();
                let builder = builder.clone();
                let watcher = graceful.watcher();
                let cut = cut.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req| service::handle(shared.clone(), req));
                    let serve = async move {
                        match tls {
                            Some(acc) => match acc.accept(sock).await {
                                Ok(s) => {
                                    let conn = builder.serve_connection(TokioIo::new(s), svc).into_owned();
                                    let _ = watcher.watch(conn).await;
                                }
                                Err(e) => tracing::debug!(error = %e, "TLS handshake failed"),
                            },
                            None => {
                                let conn = builder.serve_connection(TokioIo::new(sock), svc).into_owned();
                                let _ = watcher.watch(conn).await;
                            }
                        }
                    };
                    tokio::select! {
                        _ = serve => {}
                        _ = cut.cancelled() => {}
                    }
                });
            }
        }
    };
    drop(listener);
    let drained = tokio::select! {
        _ = graceful.shutdown() => true,
        _ = tokio::time::sleep(grace) => false,
    };
    if !drained {
        shared
            .cutting
            .store(true, std::sync::atomic::Ordering::Release);
        cut.cancel();
    }
    DrainReport { drained }
}

/// Serves the admin endpoints until `stop` fires.
pub async fn admin_loop(listener: TcpListener, shared: Arc<Shared>, stop: CancellationToken) {
    let builder = hyper::server::conn::http1::Builder::new();
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            acc = listener.accept() => {
                let Ok((sock, _)) = acc else { continue };
                let _ = sock.set_nodelay(true);
                let shared = shared.clone();
                let builder = builder.clone();
                let stop = stop.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req| crate::admin::handle(shared.clone(), req));
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
