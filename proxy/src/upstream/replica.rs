//! The replica set: parsing a replica's URL, ranking the replicas for a request (rendezvous
//! hashing of the session), and a request's [`Claim`] on the replica it goes to.
//!
//! With a session id, replicas are ranked by rendezvous (highest-random-weight) hashing of
//! `(replica, session)`: a session always lands on the same replica while it is up, and adding
//! or removing one replica moves only the sessions that rank it first (≈ 1/n of them). Without a
//! session the replica with the fewest requests in flight goes first. Either way the request
//! walks down the ranking while connections are refused, counting each refusal, so a replica
//! that is down is skipped and its sessions spread over the rest by their second choice.
//!
//! The hash is FNV-1a over the bytes followed by the splitmix64 finaliser
//! ([`tokentap_core::route`]): deterministic across processes, builds and Rust versions (unlike
//! `DefaultHasher`), so two proxies in front of the same replica set route a session the same
//! way.

use super::error::UpstreamError;
use http::uri::{Authority, PathAndQuery, Scheme, Uri};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::OwnedSemaphorePermit;

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
    pub pool: Arc<super::pool::Pool>,
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
    /// The replicas, in `--upstream` order.
    pub list: Vec<Arc<Upstream>>,
}

impl Upstreams {
    /// The replicas of `urls`, each with at most `max_connections` requests in flight.
    /// `threads`: the serving threads, each with its own idle connections.
    pub fn new(
        urls: &[String],
        max_connections: usize,
        threads: usize,
    ) -> Result<Upstreams, UpstreamError> {
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
            u.pool = Arc::new(super::pool::Pool::new(threads));
        }
        Ok(Upstreams {
            list: list.into_iter().map(Arc::new).collect(),
        })
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

/// A request's claim on one replica: one of its connection slots and one count of its load.
/// Both are given back when the claim is dropped (the response ended, or the attempt failed).
pub struct Claim {
    up: Arc<Upstream>,
    _slot: OwnedSemaphorePermit,
}

impl Claim {
    /// Claims `up` with a slot taken from its `slots`.
    pub fn new(up: Arc<Upstream>, slot: OwnedSemaphorePermit) -> Claim {
        up.in_flight.fetch_add(1, Ordering::AcqRel);
        Claim { up, _slot: slot }
    }

    /// The replica claimed.
    pub fn upstream(&self) -> &Upstream {
        &self.up
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.up.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

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
        let a = Upstreams::new(&three, 8, 1).unwrap();
        let b = Upstreams::new(&four, 8, 1).unwrap();
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
        let u = Upstreams::new(&["http://a:1".into(), "http://b:1".into()], 8, 1).unwrap();
        u.list[0].in_flight.store(3, Ordering::Relaxed);
        assert_eq!(u.ranking(None), vec![1, 0]);
    }
}
