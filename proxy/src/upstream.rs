//! The upstream side: the replica set, how a request picks a replica, and the pooled clients.
//!
//! ## Picking a replica
//! With a session id, replicas are ranked by rendezvous (highest-random-weight) hashing of
//! `(replica, session)`: a session always lands on the same replica while it is up, and adding
//! or removing one replica moves only the sessions that rank it first (≈ 1/n of them). Without a
//! session the replica with the fewest requests in flight goes first. Either way the request
//! walks down the ranking while connections are refused, counting each refusal, so a replica
//! that is down is skipped and its sessions spread over the rest by their second choice.
//!
//! The hash is FNV-1a over the bytes followed by the splitmix64 finaliser: deterministic across
//! processes, builds and Rust versions (unlike `DefaultHasher`), so two proxies in front of the
//! same replica set route a session the same way.
//!
//! ## Clients
//! One hyper-util pooled client (keep-alive, `TCP_NODELAY`, tokio pool timer) over a rustls
//! connector that speaks plain HTTP and HTTPS; over HTTPS, ALPN offers `h2` and `http/1.1` and
//! the server decides. A second client of the same kind is HTTP/2-only, for `h2c://` upstreams
//! (h2 with prior knowledge over plain TCP; the URL is rewritten to `http://`). HTTPS trusts the
//! system roots plus `--upstream-ca`.

use crate::sniff::{RequestTap, TapError};
use bytes::Bytes;
use http::uri::{Authority, PathAndQuery, Scheme, Uri};
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// Why the upstream configuration is unusable.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("upstream URL {url:?}: {why}")]
    BadUrl { url: String, why: String },
    #[error("no --upstream given")]
    None,
    #[error("upstream CA file {path}: {why}")]
    Ca { path: String, why: String },
    #[error("TLS setup: {0}")]
    Tls(String),
}

/// One replica.
#[derive(Debug)]
pub struct Upstream {
    /// The URL as configured; recorded in `record.upstream` and used as a metric label.
    pub name: String,
    scheme: Scheme,
    authority: Authority,
    /// Path prefix (no trailing `/`), prepended to the client's path.
    prefix: String,
    /// `h2c://`: HTTP/2 with prior knowledge.
    pub h2_prior: bool,
    seed: u64,
    /// Requests in flight on this replica.
    pub in_flight: AtomicUsize,
    /// Idle connections of the direct HTTP/1.1 client.
    pub pool: Arc<crate::pool::Pool>,
    /// `--max-upstream-connections`: a permit per request in flight to this replica (an
    /// HTTP/1.1 request is a connection); requests beyond wait for one (bounded by
    /// `--upstream-queue-timeout`).
    pub slots: Arc<tokio::sync::Semaphore>,
}

impl Upstream {
    /// Parses `http://`, `https://` or `h2c://` URLs with an optional path prefix.
    pub fn parse(url: &str) -> Result<Upstream, UpstreamError> {
        let bad = |why: &str| UpstreamError::BadUrl {
            url: url.to_string(),
            why: why.to_string(),
        };
        let uri: Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
        let (scheme, h2_prior) = match uri.scheme_str() {
            Some("http") => (Scheme::HTTP, false),
            Some("https") => (Scheme::HTTPS, false),
            Some("h2c") => (Scheme::HTTP, true),
            _ => return Err(bad("scheme must be http, https or h2c")),
        };
        let authority = uri.authority().cloned().ok_or_else(|| bad("no host"))?;
        let prefix = uri.path().trim_end_matches('/').to_string();
        Ok(Upstream {
            name: url.trim_end_matches('/').to_string(),
            seed: tokentap_core::route::seed(url),
            scheme,
            authority,
            prefix,
            h2_prior,
            in_flight: AtomicUsize::new(0),
            pool: Arc::default(),
            slots: Arc::new(tokio::sync::Semaphore::new(
                tokio::sync::Semaphore::MAX_PERMITS,
            )),
        })
    }

    /// The URI for a client request path on this replica.
    pub fn uri_for(&self, pq: Option<&PathAndQuery>) -> Result<Uri, http::Error> {
        let pq = pq.map_or("/", |p| p.as_str());
        let full = if self.prefix.is_empty() {
            pq.to_string()
        } else {
            format!("{}{}", self.prefix, pq)
        };
        Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(full)
            .build()
    }

    /// Plain `http://` (not `h2c://`, not `https://`): the direct client can take it.
    pub fn plain_h1(&self) -> bool {
        self.scheme == Scheme::HTTP && !self.h2_prior
    }

    /// `host[:port]` for the `Host` header.
    pub fn authority(&self) -> &Authority {
        &self.authority
    }
}

pub use tokentap_core::route::hash64;

/// The replica set.
pub struct Upstreams {
    pub list: Vec<Upstream>,
}

impl Upstreams {
    /// The replicas of `urls`, each with at most `max_connections` requests in flight.
    pub fn new(urls: &[String], max_connections: usize) -> Result<Upstreams, UpstreamError> {
        if urls.is_empty() {
            return Err(UpstreamError::None);
        }
        let mut list = urls
            .iter()
            .map(|u| Upstream::parse(u))
            .collect::<Result<Vec<_>, _>>()?;
        let n = max_connections.clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
        for u in &mut list {
            u.slots = Arc::new(tokio::sync::Semaphore::new(n));
        }
        Ok(Upstreams { list })
    }

    /// Replica indices in the order to try them for this request.
    pub fn ranking(&self, session: Option<&str>) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..self.list.len()).collect();
        if idx.len() == 1 {
            return idx;
        }
        match session {
            Some(s) => {
                let hs = hash64(s.as_bytes());
                // Highest weight first (core::route: the replay ranks its endpoints alike).
                idx.sort_by_key(|&i| {
                    std::cmp::Reverse(tokentap_core::route::weight(hs, self.list[i].seed))
                });
            }
            None => {
                idx.sort_by_key(|&i| self.list[i].in_flight.load(Ordering::Relaxed));
            }
        }
        idx
    }
}

/// The body sent upstream: the client's, tapped, or a rewritten/buffered one.
pub enum UpBody {
    Tap(RequestTap),
    Full(Full<Bytes>),
}

impl Body for UpBody {
    type Data = Bytes;
    type Error = TapError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, TapError>>> {
        match self.get_mut() {
            UpBody::Tap(t) => Pin::new(t).poll_frame(cx),
            UpBody::Full(f) => Pin::new(f)
                .poll_frame(cx)
                .map(|o| o.map(|r| r.map_err(|never| match never {}))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            UpBody::Tap(t) => t.is_end_stream(),
            UpBody::Full(f) => f.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            UpBody::Tap(t) => t.size_hint(),
            UpBody::Full(f) => f.size_hint(),
        }
    }
}

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
    pub connect_timeout: Duration,
    pub pool_idle_timeout: Duration,
    pub extra_ca: Option<std::path::PathBuf>,
    /// Load the system's root certificates (only needed for https upstreams).
    pub native_roots: bool,
}

impl Clients {
    pub fn new(cfg: &ClientConfig) -> Result<Clients, UpstreamError> {
        let tls = tls_config(cfg)?;
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
                .pool_timer(TokioTimer::new())
                .timer(TokioTimer::new())
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

/// The crypto provider every TLS config here uses ([`tokentap_core::tls::provider`]).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    tokentap_core::tls::provider()
}

fn tls_config(cfg: &ClientConfig) -> Result<rustls::ClientConfig, UpstreamError> {
    use tokentap_core::tls::{client_config, TlsError, Trust};
    let trust = Trust {
        native_roots: cfg.native_roots,
        extra_ca: cfg.extra_ca.clone(),
        insecure: false,
    };
    // ALPN is set by the connector builder (`enable_all_versions`).
    client_config(&trust, &[]).map_err(|e| match e {
        TlsError::Ca { path, why } => UpstreamError::Ca { path, why },
        TlsError::Setup(why) => UpstreamError::Tls(why),
    })
}

/// Reads every certificate of a PEM file ([`tokentap_core::tls::read_certs`]).
pub use tokentap_core::tls::read_certs;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_uri() {
        let u = Upstream::parse("http://127.0.0.1:8000/base/").unwrap();
        let pq: PathAndQuery = "/v1/chat/completions?x=1".parse().unwrap();
        assert_eq!(
            u.uri_for(Some(&pq)).unwrap().to_string(),
            "http://127.0.0.1:8000/base/v1/chat/completions?x=1"
        );
        let h = Upstream::parse("h2c://localhost:9").unwrap();
        assert!(h.h2_prior);
        assert!(h
            .uri_for(None)
            .unwrap()
            .to_string()
            .starts_with("http://localhost:9/"));
        assert!(Upstream::parse("ftp://x").is_err());
    }

    #[test]
    fn rendezvous_moves_few_sessions_when_a_replica_is_added() {
        let three: Vec<String> = (0..3).map(|i| format!("http://10.0.0.{i}:80")).collect();
        let mut four = three.clone();
        four.push("http://10.0.0.9:80".into());
        let a = Upstreams::new(&three, 8).unwrap();
        let b = Upstreams::new(&four, 8).unwrap();
        let mut moved = 0;
        let mut per = [0usize; 3];
        for s in 0..4000 {
            let id = format!("session-{s}");
            let ra = a.ranking(Some(&id))[0];
            let rb = b.ranking(Some(&id))[0];
            per[ra] += 1;
            if a.list[ra].name != b.list[rb].name {
                moved += 1;
                assert_eq!(rb, 3, "a session may only move to the new replica");
            }
        }
        // Expect ≈ 1/4 of sessions to move, and a fair spread over three replicas.
        assert!((700..1300).contains(&moved), "moved {moved}");
        assert!(per.iter().all(|&n| (1100..1600).contains(&n)), "{per:?}");
    }

    #[test]
    fn no_session_goes_to_least_loaded() {
        let u = Upstreams::new(&["http://a:1".into(), "http://b:1".into()], 8).unwrap();
        u.list[0].in_flight.store(3, Ordering::Relaxed);
        assert_eq!(u.ranking(None), vec![1, 0]);
    }
}
