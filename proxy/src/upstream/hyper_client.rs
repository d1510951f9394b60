//! hyper-util's pooled clients, for `https://` and `h2c://` replicas (and every replica with
//! `--upstream-client hyper`).
//!
//! One pooled client (keep-alive, `TCP_NODELAY`, tokio pool timer) over a rustls connector that
//! speaks plain HTTP and HTTPS; over HTTPS, ALPN offers `h2` and `http/1.1` and the server
//! decides. A second client of the same kind is HTTP/2-only, for `h2c://` upstreams (h2 with
//! prior knowledge over plain TCP; the URL is rewritten to `http://`). HTTPS trusts the system
//! roots plus `--upstream-ca` ([`super::tls`]).

use super::body::UpBody;
use super::error::UpstreamError;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

/// hyper-util's pooled client for https:// and h2c:// upstreams.
pub type HttpClient = Client<HttpsConnector<HttpConnector>, UpBody>;

/// The two pooled clients.
#[derive(Clone)]
pub struct Clients {
    /// HTTP/1.1, or h2 when TLS ALPN picks it.
    pub auto: HttpClient,
    /// h2 with prior knowledge (`h2c://`).
    pub h2: HttpClient,
}

/// Client settings.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `--connect-timeout`.
    pub connect_timeout: Duration,
    /// `--upstream-idle-timeout`.
    pub pool_idle_timeout: Duration,
    /// `--upstream-ca`.
    pub extra_ca: Option<std::path::PathBuf>,
    /// Load the system's root certificates (only needed for https upstreams).
    pub native_roots: bool,
}

impl Clients {
    /// The clients of these settings.
    pub fn new(cfg: &ClientConfig) -> Result<Clients, UpstreamError> {
        let tls = super::tls::client_config(cfg.extra_ca.clone(), cfg.native_roots)?;
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.enforce_http(false);
        http.set_connect_timeout(Some(cfg.connect_timeout));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_all_versions()
            .wrap_connector(http);
        let build = |h2: bool| {
            Client::builder(TokioExecutor::new())
                .pool_timer(crate::timers::Timer)
                .timer(crate::timers::Timer)
                .pool_idle_timeout(cfg.pool_idle_timeout)
                .pool_max_idle_per_host(usize::MAX)
                .http2_only(h2)
                .build(https.clone())
        };
        Ok(Clients {
            auto: build(false),
            h2: build(true),
        })
    }
}
